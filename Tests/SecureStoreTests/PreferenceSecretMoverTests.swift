import Foundation
import Keychain
import Preferences
import SecureStore
import TestSupport
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
        do {
            try PreferenceSecretMover(preferences: preferences, keychain: Keychain(), service: service)
                .move(key: "apiKey", toAccount: "api")
            Issue.record("expected notFound")
        } catch let error as SecureStoreError {
            #expect(error.code == SecureStoreError.notFound)
        }
        #expect(try Keychain().exists(service: service, account: "api") == false)
    }

    @Test func aDifferentSecretAlreadyInTheKeychainIsNeitherOverwrittenNorIsThePreferenceRemoved() throws {
        let directory = try TemporaryDirectory()
        let preferences = try makePreferences(directory)
        let service = uniqueService()
        try Keychain().set("already-there", service: service, account: "api")
        try preferences.set("from-preferences", forKey: "apiKey")
        do {
            try PreferenceSecretMover(preferences: preferences, keychain: Keychain(), service: service)
                .move(key: "apiKey", toAccount: "api")
            Issue.record("expected invalidArgument")
        } catch let error as SecureStoreError {
            #expect(error.code == SecureStoreError.invalidArgument)
            #expect(!error.message.contains("already-there") && !error.message.contains("from-preferences"))
        }
        #expect(try Keychain().string(service: service, account: "api") == "already-there")
        #expect(try makePreferences(directory).value(forKey: "apiKey") == .string("from-preferences"))
    }
}
