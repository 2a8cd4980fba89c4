import Foundation
import TestSupport
import Testing

/// `token set` on a terminal, labels kept, `token generate` and `token list` filters, against the real keyring.
@Suite(.serialized) struct TokenHabitsTests {
    init() throws { try Harness.require() }

    /// The token as another client of the store reads it; "" when there is none.
    private func lookup(_ app: String, _ name: String) throws -> String {
        try StoreClient.lookup(service: app, account: name) ?? ""
    }

    @Test func setOnATerminalAsksTwiceWithoutEchoAndStoresNothingOnAMismatch() throws {
        let app = uniqueApp()
        let stored = try securestoreOnTerminal(["token", "set", "t"], app: app, answers: ["s3cret-one", "s3cret-one"])
        #expect(stored.status == 0)
        #expect(stored.screen.contains("Secret for t: "))
        #expect(stored.screen.contains("Retype the secret for t: "))
        #expect(!stored.screen.contains("s3cret"), "no echo")
        #expect(try lookup(app, "t") == "s3cret-one")

        let differ = try securestoreOnTerminal(["token", "set", "--force", "t"], app: app, answers: ["s3cret-two", "s3cret-twO"])
        #expect(differ.status == 65)
        #expect(differ.screen.contains("securestore: the two entries differ; nothing was stored"))
        #expect(!differ.screen.contains("s3cret"))
        #expect(try lookup(app, "t") == "s3cret-one", "unchanged")
        let fresh = try securestoreOnTerminal(["token", "set", "new"], app: app, answers: ["a-value", "b-value"])
        #expect(fresh.status == 65)
        #expect(try lookup(app, "new").isEmpty, "nothing stored")
    }

    @Test func replacingATokenWithForceKeepsItsLabelUnlessLabelIsGiven() throws {
        let app = uniqueApp()
        #expect(try securestore(["token", "set", "gh", "--label", "GitHub PAT"], app: app, input: "one").status == 0)
        #expect(try securestore(["token", "set", "gh", "--force"], app: app, input: "two").status == 0)
        #expect(try securestore(["token", "list"], app: app).stdout == "gh  GitHub PAT\n")
        #expect(try lookup(app, "gh") == "two")
        #expect(try securestore(["token", "set", "gh", "--force", "--label", "Work"], app: app, input: "three").status == 0)
        #expect(try securestore(["token", "list"], app: app).stdout == "gh  Work\n")
    }

    @Test func generateStoresAnUnbiasedRandomTokenAndPrintsItOnlyWhenAsked() throws {
        let app = uniqueApp()
        let quiet = try securestore(["token", "generate", "api"], app: app)
        #expect(quiet.status == 0)
        #expect(quiet.stdout.isEmpty && quiet.stderr.isEmpty, "never printed without --print")
        let stored = try lookup(app, "api")
        #expect(stored.count == 32)
        #expect(stored.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
        #expect(try securestore(["token", "list"], app: app).stdout == "api  \(app) token api\n")

        let before = stored
        let exists = try securestore(["token", "generate", "api"], app: app)
        #expect(exists.status == 73)
        #expect(exists.stderr == "securestore: a token named 'api' exists; nothing was changed (hint: --force replaces it)\n")
        #expect(try lookup(app, "api") == before)

        let printed = try securestore(["token", "generate", "api", "--force", "--length", "64", "--charset", "hex", "--print"], app: app)
        #expect(printed.status == 0)
        #expect(printed.stdout.count == 64)
        #expect(printed.stdout.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(try lookup(app, "api") == printed.stdout)
        #expect(printed.stdout != before)

        // 4096 decimal digits: each digit about 410 times (an unbiased draw; far outside these bounds is a bug).
        let digits = try securestore(["token", "generate", "d", "--length", "4096", "--charset", "digits", "--print"], app: app)
        #expect(digits.stdout.count == 4096)
        for digit in "0123456789" {
            let count = digits.stdout.filter { $0 == digit }.count
            #expect((300...520).contains(count), "\(digit): \(count)")
        }
        let json = try securestore(["--json", "token", "generate", "j", "--charset", "base64url"], app: app)
        #expect(json.stdout == "{\"name\":\"j\",\"stored\":1}\n")

        let unknown = try securestore(["token", "generate", "x", "--charset", "emoji"], app: app)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix(
            "securestore: unknown --charset 'emoji' (one of: alnum, alpha, digits, hex, base64url, graph)\n"))
        #expect(try securestore(["token", "generate", "x", "--length", "0"], app: app).status == 64)
        #expect(try securestore(["token", "generate", "x", "--length", "4097"], app: app).status == 64)
        #expect(try lookup(app, "x").isEmpty)
    }

    @Test func listFiltersByPatternOrPrefix() throws {
        let app = uniqueApp()
        for name in ["gh-work", "gh-home", "slack"] {
            #expect(try securestore(["token", "set", name, "--label", name.uppercased()], app: app, input: "v").status == 0)
        }
        #expect(try securestore(["token", "list", "gh-*"], app: app).stdout.split(separator: "\n").sorted()
            == ["gh-home  GH-HOME", "gh-work  GH-WORK"])
        #expect(try securestore(["token", "list", "--prefix", "sl"], app: app).stdout == "slack  SLACK\n")
        #expect(try securestore(["--json", "token", "list", "*work"], app: app).stdout
            == "[{\"label\":\"GH-WORK\",\"name\":\"gh-work\"}]\n")
        let none = try securestore(["token", "list", "nothing*"], app: app)
        #expect(none.status == 0 && none.stdout.isEmpty)
    }
}
