// `token import --from pass|git-credentials|netrc` through the built tool, against the real keyring (and, for pass,
// the real pass and gpg with a throw-away key and store): the names, the stored secrets, the messages, that no
// secret is ever printed, that the source stays, and that bad input changes nothing.
import Foundation
import TestSupport
import Testing

private func write(_ text: String, to path: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

@Suite(.serialized) struct TokenImportTests {
    init() throws { try Harness.require() }

    private func lookup(_ app: String, _ name: String) throws -> String {
        try StoreClient.lookup(service: app, account: name) ?? ""
    }

    private func list(_ app: String) throws -> String {
        let result = try securestore(["token", "list"], app: app)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout
    }

    /// Neither output holds any of `secrets`.
    private func expectNoSecret(_ result: ProcessResult, _ secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        for secret in secrets {
            #expect(!result.stdout.contains(secret), "stdout shows a secret", sourceLocation: sourceLocation)
            #expect(!result.stderr.contains(secret), "stderr shows a secret", sourceLocation: sourceLocation)
        }
    }

    @Test func netrcEntriesAreNamedUserAtMachineStoredUnprintedAndTheFileStays() throws {
        let directory = try TemporaryDirectory()
        let netrc = directory.path + "/netrc"
        try write(
            """
            # work
            machine api.example.com login alice password "s3cret with \\"space\\""
            machine ftp.example.org
                login bob
                password hunter2-netrc
                account ignored-acct
            macdef init
            cd /pub
            bin

            machine nopass.example.net login carol
            machine ftp.example.org login bob password second-netrc
            default login anonymous password guest-netrc

            """, to: netrc)
        let secrets = ["s3cret with \"space\"", "hunter2-netrc", "second-netrc", "guest-netrc", "ignored-acct"]
        let app = uniqueApp()
        let result = try securestore(["token", "import", "--from", "netrc", netrc], app: app)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            imported alice@api.example.com
            imported bob@ftp.example.org
            imported anonymous@default
            skipped carol@nopass.example.net: no password (line 11)
            skipped bob@ftp.example.org: again at line 12; the first is kept, as curl uses it
            imported 3 token(s), skipped 2

            """)
        #expect(result.stderr == "securestore: note: \(netrc) still holds these passwords in plain text; it is never "
            + "deleted for you. curl, ftp and git may read it: once they get their passwords elsewhere, remove it with: "
            + "shred -u \(netrc)\n")
        expectNoSecret(result, secrets)
        #expect(FileManager.default.fileExists(atPath: netrc), "never deleted")
        #expect(try lookup(app, "alice@api.example.com") == "s3cret with \"space\"")
        #expect(try lookup(app, "bob@ftp.example.org") == "hunter2-netrc")
        #expect(try lookup(app, "anonymous@default") == "guest-netrc")
        #expect(try list(app) == """
            alice@api.example.com  \(app) token alice@api.example.com
            anonymous@default      \(app) token anonymous@default
            bob@ftp.example.org    \(app) token bob@ftp.example.org

            """)

        // Again: every name exists, so each is skipped and reported; nothing changes.
        #expect(try securestore(["token", "set", "--force", "bob@ftp.example.org"], app: app, input: "changed-here").status == 0)
        let again = try securestore(["--json", "token", "import", "--from", "netrc", netrc], app: app)
        #expect(again.status == 0)
        #expect(again.stdout.hasPrefix(#"{"imported":0,"replaced":0,"skipped":"#), "\(again.stdout)")
        #expect(again.stdout.contains(#"{"name":"alice@api.example.com","outcome":"skipped","reason":"a token of that name exists"}"#))
        expectNoSecret(again, secrets)
        #expect(try lookup(app, "bob@ftp.example.org") == "changed-here")
        // --force replaces them.
        let forced = try securestore(["token", "import", "--from", "netrc", "--force", netrc], app: app)
        #expect(forced.stdout.hasPrefix("replaced alice@api.example.com\nreplaced bob@ftp.example.org\n"))
        #expect(try lookup(app, "bob@ftp.example.org") == "hunter2-netrc")

        // From standard input, with a prefix: no file, so no note.
        let piped = try securestore(
            ["token", "import", "--from", "netrc", "--prefix", "netrc/", "-"], app: app,
            input: "machine x.example login y password piped-netrc\n")
        #expect(piped.stdout == "imported netrc/y@x.example\nimported 1 token(s)\n")
        #expect(piped.stderr.isEmpty)
        #expect(try lookup(app, "netrc/y@x.example") == "piped-netrc")
    }

    @Test func aNetrcWithABadLineIsRefusedWithoutShowingItAndChangesNothing() throws {
        let app = uniqueApp()
        #expect(try securestore(["token", "set", "kept"], app: app, input: "kept-value").status == 0)
        let before = try list(app)
        let cases: [(String, String)] = [
            ("machine a.example login al password two words-netrc\n",
             "line 1: a word that is not a netrc keyword (machine, default, login, password, account, macdef); it is not "
                + "shown, as it may be a password (a password with spaces must be \"quoted\")"),
            ("machine a.example login al password ok-netrc\n\nlogin\n", "line 3: 'login' has no value"),
            ("password early-netrc\nmachine a.example\n", "line 1: 'password' comes before any 'machine' or 'default'"),
            ("machine a.example password \"open-netrc\n", "line 1: a quoted value is not closed with '\"'"),
        ]
        for (input, message) in cases {
            let result = try securestore(["token", "import", "--from", "netrc", "-"], app: app, input: input)
            #expect(result.status == 65, "\(message)")
            #expect(result.stderr == "securestore: standard input \(message); nothing was imported\n")
            #expect(result.stdout.isEmpty)
            expectNoSecret(result, ["words-netrc", "two", "ok-netrc", "early-netrc", "open-netrc"])
            #expect(try list(app) == before)
        }
        let missing = try securestore(["token", "import", "--from", "netrc", "/nonexistent/netrc"], app: app)
        #expect(missing.status == 66)
        #expect(missing.stderr == "securestore: cannot read '/nonexistent/netrc': No such file or directory\n")
        let noSource = try securestore(["token", "import"], app: app)
        #expect(noSource.status == 64)
        #expect(noSource.stderr.hasPrefix("securestore: token import needs --from pass, git-credentials or netrc\n"))
    }

    @Test func gitCredentialsAreNamedLikeGitsOwnURLsWithThePasswordDecoded() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/git-credentials"
        // As git-credential-store writes it: user and password percent-encoded.
        try write(
            """
            https://alice:p%40ss%2Fword-git@github.com
            https://bob%40corp:tok-git@gitlab.example:8443/group/repo.git

            http://carol:plain-git@intranet.example

            """, to: file)
        let secrets = ["p@ss/word-git", "p%40ss", "tok-git", "plain-git"]
        let app = uniqueApp()
        let result = try securestore(["token", "import", "--from", "git-credentials", file], app: app)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            imported https://alice@github.com
            imported https://bob%40corp@gitlab.example:8443/group/repo.git
            imported http://carol@intranet.example
            imported 3 token(s)

            """)
        #expect(result.stderr.hasPrefix("securestore: note: \(file) still holds these passwords in plain text; it is never deleted for you. "))
        #expect(result.stderr.contains("remove it with: shred -u \(file) "))
        expectNoSecret(result, secrets)
        #expect(try lookup(app, "https://alice@github.com") == "p@ss/word-git")
        #expect(try lookup(app, "https://bob%40corp@gitlab.example:8443/group/repo.git") == "tok-git")

        let dry = try securestore(["token", "import", "--from", "git-credentials", "--force", "--dry-run", file], app: app)
        #expect(dry.stdout.hasSuffix("would import 0 token(s), would replace 3; nothing was stored\n"))
        #expect(dry.stderr.isEmpty)

        let before = try list(app)
        for (line, message) in [
            ("github.com alice secret-git", "not a credential URL (protocol://user:password@host)"),
            ("https://alice@github.com", "no password after the user name (protocol://user:password@host)"),
            ("https://github.com", "no user and password (protocol://user:password@host)"),
            ("https://alice:bad%zz-git@github.com", "the password has a '%' that is not followed by two hexadecimal digits"),
        ] {
            let input = "https://ok:fine-git@ok.example\n\(line)\n"
            let bad = try securestore(["token", "import", "--from", "git-credentials", "-"], app: app, input: input)
            #expect(bad.status == 65)
            #expect(bad.stderr == "securestore: standard input line 2: \(message); nothing was imported\n")
            expectNoSecret(bad, ["fine-git", "secret-git", "bad%zz-git"])
            #expect(try list(app) == before, "nothing stored, not even line 1")
        }
    }

    @Test(.enabled(if: Prerequisites.installed("pass") && Prerequisites.installed("gpg"), "needs pass and gnupg (Debian packages pass, gnupg)"))
    func passEntriesAreDecryptedByPassWithTheirGPGKeyAndKeepTheirNames() throws {
        let directory = try TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["GNUPGHOME"] = directory.path + "/gnupg"
        environment["PASSWORD_STORE_DIR"] = directory.path + "/store"
        try FileManager.default.createDirectory(
            atPath: directory.path + "/gnupg", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { _ = try? run(["gpgconf", "--kill", "gpg-agent"], environment: environment) }
        let key = try run(
            ["gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", "Import Test <import@example.invalid>",
             "default", "default", "never"], environment: environment)
        #expect(key.status == 0, "\(key.stderr)")
        #expect(try run(["pass", "init", "import@example.invalid"], environment: environment).status == 0)
        for (name, content) in [
            ("email/work", "first-pass\nlogin: alice\nurl: https://mail.example\n"),
            ("github", "second-pass\n"),
            ("web/empty-first", "\nnotes only\n"),
        ] {
            let inserted = try run(["pass", "insert", "--multiline", name], input: Data(content.utf8), environment: environment)
            #expect(inserted.status == 0, "\(inserted.stderr)")
        }
        let app = uniqueApp()
        let store = directory.path + "/store"
        let result = try securestore(["token", "import", "--from", "pass"], app: app, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            imported email/work (its first line only; --all-lines keeps the others)
            imported github
            skipped web/empty-first: the first line (the password) is empty
            imported 2 token(s), skipped 1

            """)
        #expect(result.stderr == "securestore: note: the pass store \(store) still holds these entries; it is never deleted "
            + "for you. Once 'securestore token list' shows them, remove an entry with: PASSWORD_STORE_DIR=\(store) pass rm "
            + "email/work (or the whole store: rm -r \(store))\n")
        expectNoSecret(result, ["first-pass", "second-pass", "notes only"])
        #expect(try lookup(app, "email/work") == "first-pass")
        #expect(try lookup(app, "github") == "second-pass")
        #expect(FileManager.default.fileExists(atPath: store + "/github.gpg"))

        let whole = try securestore(
            ["token", "import", "--from", "pass", "--all-lines", "--force", "--prefix", "pass/", store], app: app,
            environment: environment)
        #expect(whole.status == 0, "\(whole.stderr)")
        expectNoSecret(whole, ["first-pass", "second-pass", "notes only"])
        #expect(try lookup(app, "pass/email/work") == "first-pass\nlogin: alice\nurl: https://mail.example")
        #expect(try lookup(app, "pass/web/empty-first") == "\nnotes only")

        // An entry gpg cannot decrypt stops the import before anything is stored.
        try write("not an OpenPGP message", to: store + "/broken.gpg")
        let before = try list(app)
        let broken = try securestore(
            ["token", "import", "--from", "pass", "--prefix", "again/", store], app: app, environment: environment)
        #expect(broken.status == 65)
        #expect(broken.stderr.hasPrefix("securestore: pass could not show 'broken' (exit "))
        #expect(broken.stderr.contains("; nothing was imported (hint: check that 'pass show NAME' works here (gpg's key and agent))\n"))
        expectNoSecret(broken, ["first-pass", "second-pass"])
        #expect(try list(app) == before)

        let none = try securestore(["token", "import", "--from", "pass", directory.path + "/nostore"], app: app)
        #expect(none.status == 66)
        #expect(none.stderr == "securestore: no password store at '\(directory.path)/nostore' (hint: give its directory, or set PASSWORD_STORE_DIR)\n")
    }
}
