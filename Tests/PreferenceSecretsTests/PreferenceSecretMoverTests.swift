import Dispatch
import Foundation
import Keychain
import PreferenceSecrets
import Preferences
import SecureStore
import TestSupport
import Synchronization
import Testing

/// Moving a secret out of preferences into the keychain, against the harness's real keyring.
@Suite(.serialized) struct PreferenceSecretMoverTests {
    init() throws { try Harness.require() }

    private func makePreferences(_ directory: TemporaryDirectory) throws -> Preferences {
        try Preferences(location: PreferencesLocation(directory: directory.url))
    }

    @Test func aStoredSecretMovesAndIsRemovedOnlyAfterTheKeychainHoldsIt() throws {
        let directory = try TemporaryDirectory()
        let preferences = try makePreferences(directory)
        let service = uniqueService()
        try preferences.set("xoxb-0123456789-secret", forKey: "slackToken")
        try PreferenceSecretMover(preferences: preferences, keychain: Keychain(), service: service)
            .move(key: "slackToken", toAccount: "slack")
        #expect(try Keychain().string(service: service, account: "slack") == "xoxb-0123456789-secret")
        #expect(try makePreferences(directory).value(forKey: "slackToken") == nil)
    }

    /// Found in review: a registered default is not in the file and must not be "moved".
    @Test func aRegisteredDefaultIsNotMoved() throws {
        let directory = try TemporaryDirectory()
        let preferences = try makePreferences(directory)
        preferences.register(defaults: ["apiKey": "default-value"])
        let service = uniqueService()
        expectError(SecureStoreError.Code.notFound) {
            try PreferenceSecretMover(preferences: preferences, keychain: Keychain(), service: service)
                .move(key: "apiKey", toAccount: "api")
        }
        #expect(try Keychain().exists(service: service, account: "api") == false)
    }

    @Test func aDifferentSecretAlreadyInTheKeychainIsNeitherOverwrittenNorIsThePreferenceRemoved() throws {
        let directory = try TemporaryDirectory()
        let preferences = try makePreferences(directory)
        let service = uniqueService()
        try Keychain().set("already-there", service: service, account: "api")
        try preferences.set("from-preferences", forKey: "apiKey")
        let error = expectError(SecureStoreError.Code.invalidArgument) {
            try PreferenceSecretMover(preferences: preferences, keychain: Keychain(), service: service)
                .move(key: "apiKey", toAccount: "api")
        }
        #expect(error.map { !$0.message.contains("already-there") && !$0.message.contains("from-preferences") } == true)
        #expect(try Keychain().string(service: service, account: "api") == "already-there")
        #expect(try makePreferences(directory).value(forKey: "apiKey") == .string("from-preferences"))
    }
}

/// The guard against a concurrent change: the preference changes while the move waits for the keyring.
@Suite(.serialized) struct PreferenceSecretMoverRaceTests {
    init() throws { try Harness.require() }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring")) func aValueChangedDuringTheMoveIsKeptAndTheMoveIsRefused() throws {
        let directory = try TemporaryDirectory()
        let location = try PreferencesLocation(directory: directory.url)
        let preferences = try Preferences(location: location)
        try preferences.set("old-secret", forKey: "apiKey")
        let service = uniqueService()
        let keychain = Keychain(configuration: .init(timeout: .seconds(20)))
        _ = try keychain.exists(service: service, account: "api")  // connected before the keyring is frozen

        try Harness.keyringCtl("freeze")
        var thawed = false
        defer { if !thawed { _ = try? Harness.keyringCtl("thaw") } }
        let outcome = Mutex<(any Error)?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                try PreferenceSecretMover(preferences: preferences, keychain: keychain, service: service)
                    .move(key: "apiKey", toAccount: "api")
            } catch {
                outcome.withLock { $0 = error }
            }
            finished.signal()
        }
        // The mover reads the value at once and then waits on the frozen keyring; this sleep only makes
        // sure it has read it before the value changes (a thread start takes microseconds, not 0.5 s).
        Thread.sleep(forTimeInterval: 0.5)
        try Preferences(location: location).set("new-secret", forKey: "apiKey")
        try Harness.keyringCtl("thaw")
        thawed = true
        #expect(finished.wait(timeout: .now() + 30) == .success)

        let error = try #require(outcome.withLock { $0 } as? SecureStoreError)
        #expect(error.code == SecureStoreError.Code.inUse)
        #expect(error.message.contains("changed while it was being moved"))
        #expect(!error.message.contains("old-secret") && !error.message.contains("new-secret"))
        // Nothing is lost: the keyring holds the value that was moved, the preference keeps the new one.
        #expect(try keychain.string(service: service, account: "api") == "old-secret")
        #expect(try Preferences(location: location).value(forKey: "apiKey") == .string("new-secret"))
    }
}
