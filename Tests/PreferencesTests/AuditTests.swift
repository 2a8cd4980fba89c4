// The audit finds planted secrets without ever printing them, does not flag ordinary values, and reports
// sizes against the limits.
import Foundation
import TestSupport
import Testing
@testable import Preferences

/// Random characters from `alphabet`, so that no real-looking secret is committed to the repository.
private func random(_ count: Int, _ alphabet: String = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") -> String {
    let characters = Array(alphabet)
    return String((0..<count).map { _ in characters.randomElement()! })
}

private let upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
private let base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

/// A planted secret: key, value, the rule that must find it, and the path of the finding.
struct Plant: Sendable, CustomStringConvertible {
    var key: String
    var value: PreferenceValue
    var rule: SecretRule
    var path: String
    /// Text that must not appear in any rendering.
    var secretText: String
    var description: String { "\(key) → \(rule.id)" }
}

private func plants() -> [Plant] {
    func plain(_ key: String, _ text: String, _ rule: SecretRule) -> Plant {
        Plant(key: key, value: .string(text), rule: rule, path: key, secretText: text)
    }
    let nestedToken = random(40)
    let data = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
    return [
        plain("note1", "ghp_" + random(36), .githubToken),
        plain("note2", "github_pat_" + random(22) + "_" + random(59), .githubToken),
        plain("remote", "https://gho_" + random(36) + "@github.com/org/repo.git", .githubToken),
        plain("note3", "xoxb-" + random(12, "0123456789") + "-" + random(24), .slackToken),
        plain("note4", "AKIA" + random(16, upperDigits), .awsAccessKey),
        plain("note5", "sk-proj-" + random(20) + "T3Blbk" + random(20), .apiSecretKey),
        plain("note6", "export KEY=sk_live_" + random(24), .apiSecretKey),
        plain("note7", "glpat-" + random(20, base64url), .gitlabToken),
        plain(
            "note8", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ."
                + random(43, base64url), .jwt),
        plain(
            "note9", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + random(64) + "\n-----END OPENSSH PRIVATE KEY-----\n",
            .pemPrivateKey),
        plain("databaseURL", "postgres://alice:" + random(12) + "@db.example.com:5432/app", .urlCredentials),
        plain("dbPassword", "hunter2 but " + random(6), .passwordName),
        plain("apiKey", random(32), .secretName),
        plain("sessionToken", UUID().uuidString.lowercased(), .secretName),
        plain("client_secret", random(40, "0123456789abcdef"), .secretName),
        Plant(
            key: "accounts", value: ["work": ["user": "alice", "token": .string(nestedToken)]], rule: .secretName,
            path: "accounts.work.token", secretText: nestedToken),
        Plant(
            key: "privateKey", value: .data(data), rule: .secretName, path: "privateKey",
            secretText: data.base64EncodedString()),
    ]
}

@Suite("Audit")
struct AuditTests {
    @Test(arguments: plants())
    func eachRuleFindsItsPlantedSecretWithoutPrintingIt(_ plant: Plant) throws {
        let values: [String: PreferenceValue] = ["theme": "dark", plant.key: plant.value]
        let report = PreferencesAudit.run(values: values, limits: .default, path: "/p/prefs.json")
        #expect(report.secrets.count == 1)
        let finding = try #require(report.secrets.first)
        #expect(finding.key == plant.key)
        #expect(finding.path == plant.path)
        #expect(finding.rule == plant.rule)
        if case .string(let text) = plant.value { #expect(finding.length == text.count) }
        #expect(report.shouldFail)

        let text = report.renderText()
        let json = report.renderJSON()
        #expect(text.contains("\(plant.path): \(plant.rule.summary) [\(plant.rule.id)]"))
        #expect(text.contains("Result: FAIL (1 possible secret(s))"))
        // Neither the secret nor any long piece of it appears anywhere.
        for output in [text, json] {
            #expect(!output.contains(plant.secretText))
            let core = plant.secretText.filter { $0.isLetter || $0.isNumber }
            for start in stride(from: 0, to: max(0, core.count - 12), by: 6) {
                let piece = String(core.dropFirst(start).prefix(12))
                if piece.count == 12 { #expect(!output.contains(piece), "leaked \(piece)") }
            }
        }
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(parsed["fail"] as? Bool == true)
        let secrets = try #require(parsed["secrets"] as? [[String: Any]])
        #expect(secrets.first?["rule"] as? String == plant.rule.id)
        #expect(secrets.first?["key"] as? String == plant.key)
    }

    @Test func ordinaryValuesAreNotFlagged() throws {
        let thumbnail = Data((0..<3000).map { _ in UInt8.random(in: 0...255) })
        let values: [String: PreferenceValue] = [
            "deviceID": .string(UUID().uuidString),
            "lastDocument": .string(UUID().uuidString.lowercased()),
            "lastFolder": "/home/alice/Documents/Projects/2024-Q3/reports",
            "homepage": "https://example.com/search?q=swift+linux&page=2#results",
            "gitRemote": "ssh://git@github.com/example/repo.git",
            "greeting": "The quick brown fox jumps over the lazy dog, again and again, 42 times.",
            "accentColor": "#3366ff",
            "thumbnail": .data(thumbnail),
            "thumbnailBase64": .string(thumbnail.base64EncodedString()),
            "lastCommit": .string(random(40, "0123456789abcdef")),
            "passwordHint": "the name of my first pet",
            "rememberPassword": true,
            "tokenType": "Bearer",
            "tokenExpiry": .date(Date()),
            "sortKey": "lastModified",
            "hotkey": "cmd+shift+k",
            "keyboardLayout": "dvorak",
            "locale": "sk-SK",
            "skin": "sk-dark-theme-variant-2",
            "apiKey": "",
            "password": "",
            "apiBaseURL": "https://api.example.com/v2/",
            "sshKeyPath": "~/.ssh/id_ed25519",
            "certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "version": "1.2.3-beta.4+build.5678",
            "recentSearches": ["AKIA is a prefix", "how to rotate tokens", "eyJ means JSON"],
            "window": ["width": 1280, "height": 800, "key": "main"],
            "akiaNote": "TAKIA0123456789ABCDEF inside a word",
            "boardingPass": "Seat 12A",
        ]
        let report = PreferencesAudit.run(values: values, limits: .default, path: "/p/prefs.json")
        #expect(report.secrets.isEmpty, "flagged: \(report.secrets.map { "\($0.path) \($0.rule.id)" })")
        #expect(!report.shouldFail)
        #expect(report.renderText().contains("No values look like secrets."))
        #expect(report.renderText().hasSuffix("Result: OK\n"))
    }

    @Test func keyNamesAreJudgedByTheirLastWord() {
        #expect(SecretNames.words("apiKey") == ["api", "key"])
        #expect(SecretNames.words("APIKey") == ["api", "key"])
        #expect(SecretNames.words("github_token") == ["github", "token"])
        #expect(SecretNames.words("x-auth-token") == ["x", "auth", "token"])
        #expect(SecretNames.kind(of: "DB_PASSWORD") == .password)
        #expect(SecretNames.kind(of: "passwordHint") == .ordinary)
        #expect(SecretNames.kind(of: "privateKey") == .secret)
        #expect(SecretNames.kind(of: "sortKey") == .ordinary)
        #expect(SecretNames.kind(of: "key") == .secret)
        #expect(SecretNames.kind(of: "hotkey") == .ordinary)
    }

    @Test func sizesAreListedLargestFirstWithOversizeKeysAndAUsageBar() throws {
        let limits = PreferencesLimits(maxValueSize: 1000, softTotalSize: 1500, hardTotalSize: 2000)
        let values: [String: PreferenceValue] = [
            "small": 1, "medium": .string(String(repeating: "m", count: 500)),
            "huge": .string(String(repeating: "h", count: 1200)),
        ]
        let report = PreferencesAudit.run(values: values, limits: limits, path: "/p/prefs.json")
        #expect(report.keys.map(\.key) == ["huge", "medium", "small"])
        #expect(report.keys.map(\.valueSize) == [1202, 502, 1])
        #expect(report.totalSize == (4 + 1202) + (6 + 502) + (5 + 1))
        #expect(report.oversizeKeys.map(\.key) == ["huge"])
        #expect(report.isAboveSoftLimit)
        #expect(!report.isAboveHardLimit)
        #expect(!report.shouldFail)
        let text = report.renderText()
        #expect(text.contains("Total 1.7 KiB of 2.0 KiB (hard limit; soft limit 1.5 KiB)"))
        #expect(text.contains("[###################################.....] 86.0%  above the soft limit"))
        #expect(text.contains("  1202  huge  OVER THE PER-VALUE LIMIT"))
        #expect(text.contains("1 key(s) over the per-value limit of 1000 bytes:\n  huge (1202 bytes)"))
        #expect(!text.contains("hhhh"))
        #expect(text.hasSuffix("Result: OK\n"))
    }

    @Test func overTheHardLimitFails() throws {
        let limits = PreferencesLimits(maxValueSize: 1000, softTotalSize: 500, hardTotalSize: 1000)
        let values: [String: PreferenceValue] = [
            "a": .string(String(repeating: "a", count: 600)), "b": .string(String(repeating: "b", count: 600)),
        ]
        let report = PreferencesAudit.run(values: values, limits: limits, path: "/p/prefs.json")
        #expect(report.isAboveHardLimit)
        #expect(report.shouldFail)
        #expect(report.renderText().contains("OVER THE HARD LIMIT"))
        #expect(report.renderText().hasSuffix("Result: FAIL (over the hard size limit)\n"))
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(report.renderJSON().utf8)) as? [String: Any])
        #expect(parsed["aboveHardLimit"] as? Bool == true)
        #expect(parsed["fail"] as? Bool == true)
        #expect(parsed["totalSize"] as? Int == 2 * (1 + 602))
    }

    @Test func aHandleAuditsItsOwnFileAndTheFlaggedValueCanBeMovedOut() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            let token = "ghp_" + random(36)
            try prefs.set(token, forKey: "githubToken")
            try prefs.set("dark", forKey: "theme")
            let report = prefs.audit()
            #expect(report.path == prefs.location.fileURL.path)
            #expect(report.secrets.map(\.key) == ["githubToken"])
            // What the lead's Keychain move needs: the raw string, then remove.
            #expect(try prefs.value(forKey: "githubToken", as: String.self) == token)
            try prefs.remove("githubToken")
            #expect(prefs.audit().secrets.isEmpty)
            #expect(!String(decoding: try fileBytes(prefs.location.fileURL), as: UTF8.self).contains(token))
        }
    }

    @Test func errorMessagesNeverContainValues() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir), limits: PreferencesLimits(maxValueSize: 50))
            let secret = "ghp_" + random(60)
            let error = expectError(PreferencesError.Code.limitExceeded) { try prefs.set(secret, forKey: "githubToken") }
            #expect(error?.description.contains(secret) == false)
            #expect(error?.description.contains("githubToken") == true)
        }
    }
}

@Suite struct AuditTerminalTextTests {
    /// Keys holding terminal controls — ESC, a C1 control, a bidi override, a newline — are printed escaped, so
    /// the report cannot clear the screen, reorder a line or add a fake one.
    @Test func keysWithControlsAreEscapedInTheTextReport() {
        let keys = ["esc\u{1B}[2J", "c1\u{9B}31m", "bidi\u{202E}fdp.exe", "two\nlines"]
        var values: [String: PreferenceValue] = [:]
        for key in keys { values[key] = .string("x") }
        let text = PreferencesAudit.run(values: values, limits: PreferencesLimits(), path: "/p").renderText()
        for scalar in ["\u{1B}", "\u{9B}", "\u{202E}"] { #expect(!text.contains(scalar)) }
        #expect(text.contains("esc\\u{1B}[2J"))
        #expect(text.contains("c1\\u{9B}31m"))
        #expect(text.contains("bidi\\u{202E}fdp.exe"))
        #expect(text.contains("two\\u{A}lines"))
    }
}
