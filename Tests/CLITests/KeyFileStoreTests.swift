import Foundation
import TestSupport
import Testing

/// The tool where there is no Secret Service (issue 24): no D-Bus at all (no bus address, an empty runtime folder,
/// no display), so keys and tokens go to the encrypted key file. The built tool, real files, the real kernel
/// keyring, Debian's systemd-creds and git. Nothing here talks to the harness's keyring.
@Suite(.serialized) struct KeyFileStoreTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    private var home: String { work.path + "/home" }
    private var keyFile: String { home + "/data/securestore/keys.sealed" }

    /// The environment of a machine with no D-Bus: no bus address, an empty runtime folder, no display.
    private func headless(cacheSeconds: Int = 0, extra: [String: String] = [:]) throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY", "SECURESTORE_KEYSTORE", "SECURESTORE_PASSPHRASE_FD"] {
            environment[name] = nil
        }
        let runtime = work.path + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        environment["XDG_RUNTIME_DIR"] = runtime
        environment["HOME"] = home
        environment["XDG_DATA_HOME"] = home + "/data"
        environment["XDG_CONFIG_HOME"] = home + "/config"
        environment["SECURESTORE_CACHE_TIMEOUT"] = String(cacheSeconds)
        environment["SECURESTORE_PROMPT"] = "never"
        for (name, value) in extra { environment[name] = value }
        return environment
    }

    /// Runs the tool with `passphrase` on file descriptor 3 (when given) and `input` on standard input; in `session`
    /// (a login session keyring: ``LoginSession``) when given, else as the test runs (in CI: no login session keyring).
    private func tool(
        _ arguments: [String], passphrase: String? = "correct horse battery", input: String = "", cacheSeconds: Int = 0,
        extra: [String: String] = [:], session: LoginSession? = nil, wrapper: [String] = []
    ) throws -> ProcessResult {
        var environment = try headless(cacheSeconds: cacheSeconds, extra: extra)
        let joining = (session?.command ?? []) + wrapper
        if let passphrase {
            let file = work.path + "/passphrase-\(UUID().uuidString.prefix(8))"
            try (passphrase + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            environment["PASSFILE"] = file
            return try run(
                joining + ["bash", "-c", "exec \"$0\" --passphrase-fd 3 \"$@\" 3<\"$PASSFILE\"", product("securestore")] + arguments,
                input: Data(input.utf8), environment: environment)
        }
        return try run(joining + [product("securestore")] + arguments, input: Data(input.utf8), environment: environment)
    }

    private func sha256(_ path: String) throws -> String {
        String(try run(["sha256sum", path]).stdout.prefix(64))
    }

    @Test func withNoDBusTheTaskListTokensAndGitCredentialsLiveInTheKeyFile() throws {
        let added = try tool(["tasks", "add", "Renew", "the", "certificate"])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stderr.contains("no D-Bus session bus here, so keys and tokens go to the key file '\(keyFile)'"))
        #expect(try tool(["tasks", "list"]).stdout.contains("Renew the certificate"))
        #expect(try tool(["token", "set", "deploy"], input: "ghp_fileStoreToken123").status == 0)
        #expect(try tool(["token", "get", "deploy"]).stdout == "ghp_fileStoreToken123")
        #expect(try tool(["token", "list"]).stdout.contains("deploy"))
        // git's credential protocol through the helper, on the same store.
        let stored = try tool(["git-credential", "store"], input: "protocol=https\nhost=git.example.org\nusername=ci\npassword=s3cret-ci\n\n")
        #expect(stored.status == 0, "\(stored.stderr)")
        let got = try tool(["git-credential", "get"], input: "protocol=https\nhost=git.example.org\n\n")
        #expect(got.stdout.contains("password=s3cret-ci"), "\(got.stdout) \(got.stderr)")
        // The store says where everything is; the file holds nothing readable.
        let status = try tool(["keystore", "status"])
        #expect(status.stdout.hasPrefix("store: file (the key file '\(keyFile)')"), "\(status.stdout)")
        #expect(status.stdout.contains("token: deploy"))
        #expect(status.stdout.contains("database key: "))
        let bytes = try #require(FileManager.default.contents(atPath: keyFile))
        for plain in ["ghp_fileStoreToken123", "s3cret-ci", "deploy", "securestore.database-key"] {
            #expect(bytes.range(of: Data(plain.utf8)) == nil, "'\(plain)' is readable in the key file")
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: keyFile)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: (keyFile as NSString).deletingLastPathComponent)
        #expect((folder[.posixPermissions] as? Int) == 0o700)
        // A rotation and a verified backup work on it too.
        #expect(try tool(["db", "rotate-key"]).status == 0)
        #expect(try tool(["tasks", "list"]).stdout.contains("Renew the certificate"))
        let backup = try tool(["db", "backup", work.path + "/backup.db"])
        #expect(backup.status == 0, "\(backup.stderr)")
    }

    /// git's credential protocol through real `git` with no D-Bus: the passphrase typed once (here: given once on a
    /// descriptor), then the helper git starts reads the key from the session cache, as with gpg-agent.
    @Test func realGitApprovesFillsAndRejectsThroughTheKeyFileWithNoDBus() throws {
        let login = try LoginSession()
        defer { login.end() }
        #expect(try tool(["token", "set", "unlock-once"], input: "x", cacheSeconds: 60, session: login).status == 0)
        let environment = try headless(cacheSeconds: 60)
        // git starts the helper in the login session, as every process of that login is.
        let helper = "!\(login.command.joined(separator: " ")) \(product("securestore")) git-credential"
        func git(_ arguments: [String], _ input: String) throws -> ProcessResult {
            try TestSupport.git(arguments, input: input, credentialHelper: helper, environment: environment)
        }
        #expect(try git(["credential", "approve"], "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n").status == 0)
        let fill = try git(["credential", "fill"], "protocol=https\nhost=git.example.com\n\n")
        #expect(fill.stdout.contains("username=alice\n") && fill.stdout.contains("password=s3cret-pw\n"), "\(fill.stderr)")
        #expect(try git(["credential", "reject"], "protocol=https\nhost=git.example.com\nusername=alice\npassword=old-pw\n\n").status == 0)
        #expect(try git(["credential", "fill"], "protocol=https\nhost=git.example.com\n\n").stdout.contains("password=s3cret-pw"))
        #expect(try git(["credential", "reject"], "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n").status == 0)
        let after = try git(["credential", "fill"], "protocol=https\nhost=git.example.com\n\n")
        #expect(!after.stdout.contains("s3cret-pw"))
        #expect(try tool(["keystore", "status"], passphrase: nil, cacheSeconds: 60, session: login).stdout.contains("git credential") == false)
        _ = try tool(["lock"], passphrase: nil, session: login)
    }

    /// One git operation runs the helper several times (get, then store or erase), each inheriting the passphrase's
    /// descriptor: with no cache at all (SECURESTORE_CACHE=off, as where seccomp blocks keyctl) a descriptor that is a
    /// file is read from its start every time, so a password rotated on the server is erased and replaced.
    @Test func gitRunsTheHelperManyTimesOnOnePassphraseFileWithNoCache() throws {
        var environment = try headless(cacheSeconds: 600, extra: ["SECURESTORE_CACHE": "off"])
        environment["PASSFILE"] = try passphraseFile()
        environment["SS"] = product("securestore")
        // A job-wide descriptor, as a CI script would set it: `exec 3<file; export SECURESTORE_PASSPHRASE_FD=3`.
        func git(_ input: String, _ arguments: String) throws -> ProcessResult {
            try run(
                ["bash", "-c", "exec 3<\"$PASSFILE\"; export SECURESTORE_PASSPHRASE_FD=3; "
                    + "git -c credential.helper= -c credential.helper='!\"$SS\" git-credential' \(arguments)"],
                input: Data(input.utf8), environment: environment)
        }
        let who = "protocol=https\nhost=ci.example.com\n"
        #expect(try git(who + "username=bot\npassword=before-rotation\n\n", "credential approve").status == 0)
        let first = try git(who + "\n", "credential fill")
        #expect(first.stdout.contains("password=before-rotation"), "\(first.stderr)")
        // The server's password changed: git rejects the old one (erase), then stores the new one.
        let rejected = try git(who + "username=bot\npassword=before-rotation\n\n", "credential reject")
        #expect(rejected.status == 0 && rejected.stderr.isEmpty, "\(rejected.stderr)")
        #expect(try git(who + "username=bot\npassword=after-rotation\n\n", "credential approve").status == 0)
        let second = try git(who + "\n", "credential fill")
        #expect(second.stdout.contains("password=after-rotation") && !second.stdout.contains("before-rotation"), "\(second.stderr)")
        // All of it in one process tree on one descriptor: several helper runs in one shell.
        let many = try run(
            ["bash", "-c", "exec 3<\"$PASSFILE\"; for i in 1 2 3; do \"$SS\" --passphrase-fd 3 token get api-missing; "
                + "echo \"rc=$?\"; done"], environment: environment)
        #expect(many.stdout == "rc=66\nrc=66\nrc=66\n", "\(many.stdout)\(many.stderr)")
        // An empty file says so, and a descriptor at the end of a pipe says it is empty.
        let empty = work.path + "/empty-passphrase"
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        environment["EMPTY"] = empty
        let none = try run(["bash", "-c", "exec \"$SS\" --passphrase-fd 3 token get api 3<\"$EMPTY\""], environment: environment)
        #expect(none.status == 65 && none.stderr.contains("is empty"), "\(none.stderr)")
    }

    /// Found by review: with prompts off the key file never asks on the terminal (shell completion ran with
    /// SECURESTORE_PROMPT=never and got a passphrase prompt); a cache timeout that is not a number of seconds is a
    /// usage error, not a crash (5000000000 trapped and left the key cached for ever); the "no D-Bus" notice comes
    /// once, when the file is made, not on commands that never touch a key.
    @Test func noPromptWhenPromptsAreOffAndTheCacheTimeoutIsChecked() throws {
        let prefs = try tool(["prefs", "set", "theme", "dark"], passphrase: nil)
        #expect(prefs.status == 0 && !prefs.stderr.contains("no D-Bus"), "\(prefs.stderr)")
        let first = try tool(["token", "set", "api"], input: "v1")
        #expect(first.stderr.contains("no D-Bus session bus here"), "\(first.stderr)")
        let second = try tool(["token", "set", "--force", "api"], input: "v2")
        #expect(second.status == 0 && !second.stderr.contains("no D-Bus"), "\(second.stderr)")
        // A real terminal (script(1)), prompts off, no cache, no descriptor: locked at once, nothing asked.
        var environment = try headless(cacheSeconds: 0)
        environment["SS"] = product("securestore")
        let completion = try run(
            ["timeout", "20", "script", "-qec", "\"$SS\" token get api </dev/null; echo \"status=$?\"", "/dev/null"],
            environment: environment)
        #expect(!completion.stdout.contains("Passphrase for the key file"), "\(completion.stdout)")
        #expect(completion.stdout.contains("may not ask its passphrase here"), "\(completion.stdout)")
        #expect(completion.stdout.contains("status=77"), "\(completion.stdout)")
        for bad in ["5000000000", "10m", "-1", "off"] {
            let got = try tool(["token", "get", "api"], extra: ["SECURESTORE_CACHE_TIMEOUT": bad])
            #expect(got.status == 64, "\(bad): \(got.stderr)")
            #expect(got.stderr.contains("SECURESTORE_CACHE_TIMEOUT must be a whole number of seconds"), "\(got.stderr)")
        }
        #expect(try tool(["token", "get", "api"]).stdout == "v2")
    }

    /// Issue 33 #6: in a container whose seccomp filter refuses the kernel keyring (Docker's default), the key file
    /// works on its passphrase descriptor, and `keystore status` says why nothing is cached; an explicit
    /// `--keystore file` that makes the file says where it went; reading from a file not made yet makes nothing.
    @Test func whereTheKernelKeyringIsBlockedStatusSaysSoAndTheKeyFileStillWorks() throws {
        let blocked = [URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path + "/Harness/without-keyctl"]
        let probe = try run(blocked + ["true"])
        guard probe.status == 0 else {
            print("skipped: \(probe.stderr.trimmingCharacters(in: .whitespacesAndNewlines)) (make deps installs it)")
            return
        }
        let login = try LoginSession()
        defer { login.end() }
        let missing = try tool(["--keystore", "file", "token", "get", "api"], passphrase: nil, wrapper: blocked)
        #expect(missing.status == 66, "\(missing.stderr)")
        #expect(missing.stderr.contains("no token named 'api'"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keyFile), "reading made no key file")

        let stored = try tool(["--keystore", "file", "token", "set", "api"], input: "v1", cacheSeconds: 600,
                              session: login, wrapper: blocked)
        #expect(stored.status == 0, "\(stored.stderr)")
        // (`keyctl session` says "Joined session keyring: N" first.)
        #expect(stored.stderr.hasSuffix("\nsecurestore: made the key file '\(keyFile)'; keys and tokens go there, sealed with the passphrase\n"),
                "\(stored.stderr)")
        let hash = try sha256(keyFile)
        let status = try tool(["--keystore", "file", "keystore", "status"], cacheSeconds: 600, session: login, wrapper: blocked)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("unlocked key cached in: off: the kernel keyring is unavailable here (keyctl: "
            + "Operation not permitted; a container's seccomp filter may block it)"), "\(status.stdout)")
        #expect(status.stdout.contains("token: api"), "\(status.stdout)")
        let read = try tool(["--keystore", "file", "token", "get", "api"], cacheSeconds: 600, session: login, wrapper: blocked)
        #expect(read.status == 0 && read.stdout == "v1", "\(read.stderr)")
        #expect(try sha256(keyFile) == hash, "reading changed nothing")
        // Without a descriptor nothing was cached for the next command: it cannot read the file.
        let uncached = try tool(["--keystore", "file", "token", "get", "api"], passphrase: nil, cacheSeconds: 600,
                                session: login, wrapper: blocked)
        #expect(uncached.status == 77, "\(uncached.stderr)")
        // The same login session without the filter: the cache is there.
        let open = try tool(["--keystore", "file", "keystore", "status"], cacheSeconds: 600, session: login)
        #expect(open.stdout.contains("unlocked key cached in: the login session keyring"), "\(open.stdout)")
    }

    @Test func aWrongPassphraseIsRefusedAndChangesNothing() throws {
        #expect(try tool(["token", "set", "api"], input: "value-1").status == 0)
        #expect(try tool(["tasks", "add", "Keep", "me"]).status == 0)
        let before = try sha256(keyFile)
        for arguments in [["token", "get", "api"], ["token", "set", "api2"], ["tasks", "list"], ["token", "delete", "api"]] {
            let wrong = try tool(arguments, passphrase: "not the passphrase", input: "value-2")
            #expect(wrong.status == 77, "\(arguments): \(wrong.stderr)")
            #expect(wrong.stderr == "securestore: the passphrase does not open the key file '\(keyFile)'; nothing was changed\n")
            #expect(try sha256(keyFile) == before)
        }
        // No passphrase and no terminal: locked, said how to give one.
        let none = try tool(["token", "get", "api"], passphrase: nil)
        #expect(none.status == 77)
        #expect(none.stderr.contains("is locked and may not ask its passphrase here (prompts are off); give it with --passphrase-fd N"))
        #expect(try tool(["token", "get", "api"]).stdout == "value-1")
    }

    @Test func aHostileKeyFileIsRefusedAndLeftAsItIs() throws {
        #expect(try tool(["token", "set", "api"], input: "value-1").status == 0)
        let original = try #require(FileManager.default.contents(atPath: keyFile))
        func check(_ what: String, _ expected: String, status: Int32 = 65) throws {
            let before = try run(["sh", "-c", "ls -l '\(keyFile)'; if [ -f '\(keyFile)' ] && [ ! -p '\(keyFile)' ]; then sha256sum '\(keyFile)'; fi"]).stdout
            let got = try tool(["token", "get", "api"])
            #expect(got.status == status, "\(what): \(got.stderr)")
            #expect(got.stderr.contains(expected), "\(what): \(got.stderr)")
            #expect(try run(["sh", "-c", "ls -l '\(keyFile)'; if [ -f '\(keyFile)' ] && [ ! -p '\(keyFile)' ]; then sha256sum '\(keyFile)'; fi"]).stdout == before, "\(what)")
        }
        try original.prefix(50).write(to: URL(fileURLWithPath: keyFile))
        try check("truncated", "is truncated")
        var flipped = original
        flipped[flipped.count - 30] ^= 0x01
        try flipped.write(to: URL(fileURLWithPath: keyFile))
        try check("flipped", "is damaged: the passphrase is right but its contents do not authenticate")
        // One flipped byte anywhere in the header — log2 N, r, p, the salt, the check value — is damage (65, naming
        // the file), told before any key is derived; never "wrong passphrase" (77), never scrypt's own failure.
        for (field, offset) in [("log2 N", 10), ("r", 12), ("p", 16), ("salt", 30), ("check value", 70), ("checksum", 85)] {
            var header = original
            header[offset] ^= 0x04
            try header.write(to: URL(fileURLWithPath: keyFile))
            try check("a flipped \(field)", "the key file '\(keyFile)' is damaged: its header does not match its checksum")
        }
        // A wrong passphrase stays 77.
        try original.write(to: URL(fileURLWithPath: keyFile))
        let wrong = try tool(["token", "get", "api"], passphrase: "not the passphrase")
        #expect(wrong.status == 77 && wrong.stderr.contains("the passphrase does not open the key file"), "\(wrong.stderr)")
        var newer = original
        newer[8] = 9
        try newer.write(to: URL(fileURLWithPath: keyFile))
        try check("newer", "was written by a newer SecureStore (format 9)")
        try Data(count: 17 << 20).write(to: URL(fileURLWithPath: keyFile))
        try check("huge", "more than a key file's")
        try FileManager.default.removeItem(atPath: keyFile)
        #expect(mkfifo(keyFile, 0o600) == 0)
        try check("a FIFO", "is not a regular file")
        try FileManager.default.removeItem(atPath: keyFile)
        try original.write(to: URL(fileURLWithPath: work.path + "/elsewhere.sealed"))
        try FileManager.default.createSymbolicLink(atPath: keyFile, withDestinationPath: work.path + "/elsewhere.sealed")
        try check("a symlink", "is a symbolic link")
        // Put back, it opens.
        try FileManager.default.removeItem(atPath: keyFile)
        try original.write(to: URL(fileURLWithPath: keyFile))
        #expect(chmod(keyFile, 0o600) == 0, "as a restore from a backup must leave it")
        #expect(try tool(["token", "get", "api"]).stdout == "value-1")
    }

    /// A key file written before format 2 (scrypt N = 2^15, no header checksum: Keys/fixtures) opens; a write seals it
    /// as format 2 under the parameters its key was derived with (the same passphrase opens it); `keystore passphrase`
    /// moves it to today's parameters (N = 2^17).
    @Test func aFormatOneKeyFileOpensAndIsUpgraded() throws {
        try FileManager.default.createDirectory(atPath: directoryOf(keyFile), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture("keyfile-format1.sealed"), toPath: keyFile)
        // A checkout leaves the fixture 0644, which the tool refuses (as a key others can read); a real one is 0600.
        #expect(chmod(keyFile, 0o600) == 0)
        let old = "v1 fixture passphrase"
        #expect(try tool(["token", "get", "fixture"], passphrase: old).stdout == "token-from-format-1")
        func header() throws -> [UInt8] { Array(try #require(FileManager.default.contents(atPath: keyFile)).prefix(11)) }
        #expect(try header()[8] == 1)
        #expect(try tool(["token", "set", "added"], passphrase: old, input: "after-upgrade").status == 0)
        #expect(try header()[8] == 2 && header()[10] == 15, "format 2, the file's own N kept")
        #expect(try tool(["token", "get", "fixture"], passphrase: old).stdout == "token-from-format-1")
        let newPass = work.path + "/upgraded-pass"
        try "an upgraded passphrase\n".write(toFile: newPass, atomically: true, encoding: .utf8)
        var environment = try headless()
        environment["PASSFILE"] = try passphraseFile(old)
        environment["NEWFILE"] = newPass
        let changed = try run(
            ["bash", "-c", "\"$0\" --passphrase-fd 3 keystore passphrase --new-passphrase-fd 4 3<\"$PASSFILE\" 4<\"$NEWFILE\"",
             product("securestore")], environment: environment)
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(try header()[10] == 17, "today's N = 2^17")
        #expect(try tool(["token", "get", "added"], passphrase: "an upgraded passphrase").stdout == "after-upgrade")
        #expect(try tool(["token", "get", "fixture"], passphrase: "an upgraded passphrase").stdout == "token-from-format-1")
    }

    /// The whole passphrase input counts (one trailing newline dropped): a second line, bytes after a 0x0a in a binary
    /// key, anything past 4096 bytes. Over 64 KiB is an error that creates and changes nothing, never a silent cut.
    @Test func theWholePassphraseCountsAndTooLongIsAnErrorNotACut() throws {
        func withFile(_ bytes: [UInt8], _ arguments: [String], input: String = "") throws -> ProcessResult {
            let file = work.path + "/pass-\(UUID().uuidString.prefix(8))"
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            var environment = try headless()
            environment["PASSFILE"] = file
            return try run(
                ["bash", "-c", "exec \"$0\" --passphrase-fd 3 \"$@\" 3<\"$PASSFILE\"", product("securestore")] + arguments,
                input: Data(input.utf8), environment: environment)
        }
        // Over the limit: a clear error, no key file made.
        let huge = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
        let refused = try withFile(huge, ["token", "set", "api"], input: "v")
        #expect(refused.status == 65 && refused.stderr.contains("is longer than 65536 bytes; nothing was changed"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keyFile))
        // A 64-byte binary key whose third byte is a newline: its first two bytes do not open the file.
        let binary: [UInt8] = [0x41, 0x42, 0x0a] + (3..<64).map { UInt8(truncatingIfNeeded: $0 &* 37) | 0x80 }
        #expect(try withFile(binary, ["token", "set", "api"], input: "binary-keyed").status == 0)
        #expect(try withFile(Array(binary.prefix(2)) + [0x0a], ["token", "get", "api"]).status == 77)
        #expect(try withFile(binary, ["token", "get", "api"]).stdout == "binary-keyed")
        // Two long passphrases sharing their first 4096 bytes are different passphrases.
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: 5000)
        var other = long
        other[4500] = UInt8(ascii: "y")
        let current = work.path + "/binary-pass"
        try Data(binary).write(to: URL(fileURLWithPath: current))
        let next = work.path + "/long-pass"
        try Data(long + [0x0a]).write(to: URL(fileURLWithPath: next))
        var environment = try headless()
        environment["OLD"] = current
        environment["NEW"] = next
        let changed = try run(
            ["bash", "-c", "exec \"$0\" --passphrase-fd 3 keystore passphrase --new-passphrase-fd 4 3<\"$OLD\" 4<\"$NEW\"",
             product("securestore")], environment: environment)
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(try withFile(other, ["token", "get", "api"]).status == 77)
        #expect(try withFile(long, ["token", "get", "api"]).stdout == "binary-keyed", "one trailing newline is dropped")
        // A file made before (format 1) took the first line only, and keeps that rule after it is written again.
        try FileManager.default.removeItem(atPath: keyFile)
        try FileManager.default.copyItem(atPath: fixture("keyfile-format1.sealed"), toPath: keyFile)
        #expect(chmod(keyFile, 0o600) == 0, "a checkout leaves the fixture 0644")
        let twoLines = Array("v1 fixture passphrase\nsecond line\n".utf8)
        #expect(try withFile(twoLines, ["token", "get", "fixture"]).stdout == "token-from-format-1")
        #expect(try withFile(twoLines, ["token", "set", "more"], input: "m").status == 0)
        #expect(try withFile(Array("v1 fixture passphrase\n".utf8), ["token", "get", "more"]).stdout == "m")
    }

    /// As OpenSSH refuses a private key others can read: a key file others can read or write, one owned by another
    /// user, a folder others can write — each refused (77) with the chmod/chown that fixes it, the file unchanged;
    /// fixed as told, it opens.
    @Test func aKeyFileOthersCanReadOrChangeIsRefusedWithTheFix() throws {
        #expect(try tool(["token", "set", "api"], input: "guarded").status == 0)
        let folder = directoryOf(keyFile)
        let before = try sha256(keyFile)
        func refused(_ what: String, _ expected: String) throws {
            let got = try tool(["token", "get", "api"])
            #expect(got.status == 77, "\(what): \(got.stderr)")
            #expect(got.stderr.contains(expected), "\(what): \(got.stderr)")
            #expect(got.stdout.isEmpty)
            #expect(try sha256(keyFile) == before, "\(what): the file is unchanged")
        }
        #expect(chmod(keyFile, 0o644) == 0)
        try refused("0644", "can be read or written by others (mode 0644); it was refused and left as it is (chmod 600 '\(keyFile)')")
        #expect(chmod(keyFile, 0o660) == 0)
        try refused("0660", "(mode 0660)")
        #expect(chmod(keyFile, 0o600) == 0)
        #expect(chown(keyFile, 65534, 65534) == 0)
        try refused("another owner", "belongs to uid 65534, not to you (uid \(geteuid()))")
        #expect(chown(keyFile, geteuid(), getegid()) == 0)
        #expect(chmod(folder, 0o777) == 0)
        try refused("a folder others can write", "the folder '\(folder)' of the key file can be changed by others (mode 0777")
        #expect(chmod(folder, 0o700) == 0)
        #expect(try tool(["token", "get", "api"]).stdout == "guarded")
    }

    @Test func twoProcessesAddingAtOnceLoseNothingAndKillNineLosesNoAcknowledgedItem() throws {
        #expect(try tool(["token", "set", "first"], input: "v").status == 0)
        let environment = try headless()
        let passfile = work.path + "/pass"
        try "correct horse battery\n".write(toFile: passfile, atomically: true, encoding: .utf8)
        var env = environment
        env["PASSFILE"] = passfile
        env["SS"] = product("securestore")
        let script = """
            for w in a b; do
              ( for i in $(seq 1 15); do printf "v-$w-$i" | "$SS" --passphrase-fd 3 token set "t-$w-$i" 3<"$PASSFILE" || echo "failed $w $i"; done ) &
            done
            wait
            """
        let parallel = try run(["bash", "-c", script], environment: env)
        #expect(!parallel.stdout.contains("failed"), "\(parallel.stdout) \(parallel.stderr)")
        let listed = try tool(["token", "list"]).stdout
        for w in ["a", "b"] {
            for i in 1...15 { #expect(listed.contains("t-\(w)-\(i)"), "lost t-\(w)-\(i)") }
        }
        // kill -9 at many moments of writes: every write that said it was done is there, and the file opens.
        let killing = """
            for i in $(seq 1 25); do
              printf "k-$i" | "$SS" --passphrase-fd 3 token set "k-$i" 3<"$PASSFILE" & pid=$!
              sleep 0.0$((RANDOM % 9)); kill -9 $pid 2>/dev/null
              if wait $pid; then echo "done k-$i"; fi
            done
            """
        let killed = try run(["bash", "-c", killing], environment: env)
        let acknowledged = killed.stdout.split(separator: "\n").map { String($0.dropFirst(5)) }
        for name in acknowledged {
            let got = try tool(["token", "get", name])
            #expect(got.status == 0 && got.stdout == name, "acknowledged \(name) lost: \(got.stderr)")
        }
        #expect(try tool(["token", "get", "first"]).stdout == "v")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: (keyFile as NSString).deletingLastPathComponent)
            .filter { $0.contains(".tmp-") }
        // A kill -9 leaves a temporary file only until the next write sweeps it.
        #expect(try tool(["token", "set", "last"], input: "z").status == 0)
        let after = try FileManager.default.contentsOfDirectory(atPath: (keyFile as NSString).deletingLastPathComponent)
            .filter { $0.contains(".tmp-") }
        #expect(after.isEmpty, "left: \(after) (before the sweep: \(leftovers))")
    }

    @Test func theSessionCacheExpiresIsDroppedByLockAndIsNotReadableByAnotherUser() throws {
        let login = try LoginSession()
        defer { login.end() }
        #expect(try tool(["token", "set", "api"], input: "cached-value", cacheSeconds: 2, session: login).status == 0)
        // Unlocked once: no passphrase needed within the timeout.
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 2, session: login).stdout == "cached-value")
        // Another user (in a session keyring of its own, as a login gets from pam_keyinit) sees no such key in the
        // kernel keyring. (A process of ours that only changes its user id keeps our session keyring, and with it
        // possession of the key: Docs/keystores.md.)
        let other = try run(["keyctl", "session", "-", "runuser", "-u", "nobody", "--", "cat", "/proc/keys"])
        #expect(!other.stdout.contains("securestore:keyfile:"), "\(other.stdout)")
        let mine = try run(login.command + ["cat", "/proc/keys"]).stdout
        #expect(mine.contains("securestore:keyfile:"))
        // lock drops it.
        let locked = try tool(["lock"], passphrase: nil, session: login)
        #expect(locked.stdout.hasPrefix("locked the key file"), "\(locked.stdout) \(locked.stderr)")
        #expect(try tool(["token", "get", "api"], passphrase: nil, session: login).status == 77)
        // Unlocked again, it expires by itself.
        #expect(try tool(["token", "get", "api"], cacheSeconds: 1, session: login).status == 0)
        Thread.sleep(forTimeInterval: 2.5)
        #expect(try tool(["token", "get", "api"], passphrase: nil, session: login).status == 77)
    }

    /// The id and description of the cached key in `login`'s keyring, as `keyctl show @s` lists it.
    private func cachedKey(in login: LoginSession) throws -> (id: String, description: String)? {
        let shown = try run(login.command + ["keyctl", "show", "@s"]).stdout
        guard let line = shown.split(separator: "\n").first(where: { $0.contains("securestore:keyfile:") }) else { return nil }
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard let id = fields.first, let description = fields.last else { return nil }
        return (String(id), String(description))
    }

    /// Another user reached from the login that unlocked the key — `su`, `runuser`, `setpriv --reuid` all keep the
    /// session keyring, so they possess the key — cannot read it; a second login of the same user does not see it;
    /// the owner in the session can (so the key is there to be refused).
    @Test func theCachedKeyIsNotReadableAfterSuRunuserOrSetprivNorFromAnotherLogin() throws {
        let login = try LoginSession()
        defer { login.end() }
        #expect(try tool(["token", "set", "api"], input: "session-value", cacheSeconds: 60, session: login).status == 0)
        let cached = try #require(try cachedKey(in: login), "the unlocked key is cached in the login session keyring")
        let owner = try run(login.command + ["sh", "-c", "keyctl pipe \(cached.id) | wc -c"])
        #expect(owner.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "40", "the owner reads it: \(owner.stderr)")
        let permissions = try run(login.command + ["keyctl", "rdescribe", cached.id]).stdout
        #expect(permissions.contains(";002f0000;"), "no possessor rights, owner view/read/write/search/setattr: \(permissions)")
        var others: [[String]] = [
            ["runuser", "-u", "nobody", "--", "keyctl", "pipe", cached.id],
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "keyctl", "pipe", cached.id],
            ["runuser", "-u", "nobody", "--", "keyctl", "search", "@s", "user", cached.description],
        ]
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/su") {
            others.append(["su", "-s", "/bin/sh", "nobody", "-c", "keyctl pipe \(cached.id)"])
        }
        for command in others {
            let attempt = try run(login.command + command)
            #expect(attempt.status != 0 && attempt.stdout.isEmpty, "\(command.joined(separator: " ")) read the key: \(attempt.stdout)")
        }
        // A second login of the same user (a session keyring of its own) neither sees it nor is let in without the
        // passphrase.
        let second = try LoginSession()
        defer { second.end() }
        #expect(try cachedKey(in: second) == nil)
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 60, session: second).status == 77)
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 60, session: login).stdout == "session-value")
    }

    /// Without a login session keyring (a container, a CI step, cron: no pam_keyinit) the key is not cached, so two
    /// containers of the same uid (`unshare --pid --mount --net`, as root, no user namespace) share nothing; the
    /// status says so, and SECURESTORE_CACHE=user is the way to ask for the shared cache.
    @Test(.enabled(if: LoginSession.processHasNone, "the test runs in a login session keyring: cannot make the case")) func withNoLoginSessionKeyringNothingIsCachedForTheNextContainer() throws {
        let container = ["unshare", "--pid", "--mount", "--net", "--fork"]
        let first = try run(
            container + ["bash", "-c", "exec \"$0\" --passphrase-fd 3 token set api 3<\"$PASSFILE\"", product("securestore")],
            input: Data("container-value".utf8),
            environment: try headless(cacheSeconds: 600, extra: ["PASSFILE": try passphraseFile()]))
        #expect(first.status == 0, "\(first.stderr)")
        let next = try run(container + ["keyctl", "show", "@us"], environment: try headless())
        #expect(!next.stdout.contains("securestore:keyfile:"), "\(next.stdout)")
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 600).status == 77)
        let status = try tool(["--keystore", "file", "keystore", "status"], cacheSeconds: 600)
        #expect(status.stdout.contains("unlocked key cached in: off: no login session keyring here"), "\(status.stdout)")
        // Asked for: cached in the user's keyring, and said so.
        let asked = ["SECURESTORE_CACHE": "user"]
        #expect(try tool(["token", "get", "api"], cacheSeconds: 600, extra: asked).status == 0)
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 600, extra: asked).stdout == "container-value")
        let told = try tool(["--keystore", "file", "keystore", "status"], passphrase: nil, cacheSeconds: 600, extra: asked)
        #expect(told.stdout.contains("the user session keyring of uid"), "\(told.stdout)")
        #expect(try tool(["lock"], passphrase: nil, extra: asked).stdout.hasPrefix("locked the key file"))
        let bad = try tool(["token", "get", "api"], extra: ["SECURESTORE_CACHE": "forever"])
        #expect(bad.status == 64 && bad.stderr.contains("SECURESTORE_CACHE must be session"), "\(bad.stderr)")
    }

    /// As gpg-agent's caches: each use starts the idle timeout again, and the maximum ends it however often it is used.
    @Test func theCacheTimeoutStartsAgainOnUseAndTheMaximumEndsIt() throws {
        let login = try LoginSession()
        defer { login.end() }
        #expect(try tool(["token", "set", "api"], input: "used-value", cacheSeconds: 3, session: login).status == 0)
        for _ in 0..<5 {
            Thread.sleep(forTimeInterval: 1)
            #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 3, session: login).stdout == "used-value")
        }
        Thread.sleep(forTimeInterval: 4)
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 3, session: login).status == 77)
        let capped = ["SECURESTORE_CACHE_MAX_TIMEOUT": "3"]
        #expect(try tool(["token", "get", "api"], cacheSeconds: 600, extra: capped, session: login).status == 0)
        Thread.sleep(forTimeInterval: 1)
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 600, extra: capped, session: login).status == 0)
        Thread.sleep(forTimeInterval: 3)
        #expect(try tool(["token", "get", "api"], passphrase: nil, cacheSeconds: 600, extra: capped, session: login).status == 77)
    }

    private func passphraseFile(_ passphrase: String = "correct horse battery") throws -> String {
        let file = work.path + "/passphrase-\(UUID().uuidString.prefix(8))"
        try (passphrase + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    private func directoryOf(_ path: String) -> String { (path as NSString).deletingLastPathComponent }

    /// A file of the repository's Keys/fixtures.
    private func fixture(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Keys/fixtures/" + name).path
    }

    @Test func changingThePassphraseKeepsEveryItemAndTheOldOneStopsWorking() throws {
        #expect(try tool(["token", "set", "api"], input: "value-1").status == 0)
        #expect(try tool(["tasks", "add", "Survive", "the", "change"]).status == 0)
        let newfile = work.path + "/new-pass"
        try "a new passphrase\n".write(toFile: newfile, atomically: true, encoding: .utf8)
        var environment = try headless()
        environment["PASSFILE"] = work.path + "/old-pass"
        try "correct horse battery\n".write(toFile: work.path + "/old-pass", atomically: true, encoding: .utf8)
        environment["NEWFILE"] = newfile
        let changed = try run(
            ["bash", "-c", "\"$0\" --passphrase-fd 3 keystore passphrase --new-passphrase-fd 4 3<\"$PASSFILE\" 4<\"$NEWFILE\"",
             product("securestore")], environment: environment)
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(try tool(["token", "get", "api"]).status == 77)
        #expect(try tool(["token", "get", "api"], passphrase: "a new passphrase").stdout == "value-1")
        #expect(try tool(["tasks", "list"], passphrase: "a new passphrase").stdout.contains("Survive the change"))
    }

    @Test(.enabled(if: Harness.hasSecretService, "moves to and from the Secret Service of the harness")) func keysMoveBetweenTheKeyFileAndTheSecretServiceAndStillOpenTheDatabase() throws {
        // The harness's Secret Service is on the bus; the key file is the headless one. Move there and back.
        #expect(try tool(["tasks", "add", "Moved", "with", "its", "key"]).status == 0)
        #expect(try tool(["token", "set", "api"], input: "moving-value").status == 0)
        let app = ["--keystore", "file"]
        let bus = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        try #require(!bus.isEmpty, "the harness's bus")
        let toService = try tool(app + ["keystore", "move", "--to", "secret-service"], extra: ["DBUS_SESSION_BUS_ADDRESS": bus])
        #expect(toService.status == 0, "\(toService.stderr)")
        #expect(toService.stdout.contains("moved 2 item(s) to the Secret Service"), "\(toService.stdout)")
        #expect(try tool(["keystore", "status"]).stdout.contains("no keys or tokens"))
        let viaBus = try tool(["tasks", "list"], extra: ["DBUS_SESSION_BUS_ADDRESS": bus])
        #expect(viaBus.stdout.contains("Moved with its key"), "\(viaBus.stderr)")
        let back = try tool(["--keystore", "secret-service", "keystore", "move", "--to", "file"], extra: ["DBUS_SESSION_BUS_ADDRESS": bus])
        #expect(back.status == 0, "\(back.stderr)")
        #expect(try tool(["tasks", "list"]).stdout.contains("Moved with its key"))
        #expect(try tool(["token", "get", "api"]).stdout == "moving-value")
    }

    /// The sequence an operator follows after an interrupted `keystore move`: the items are in both stores, the tool
    /// (a bus is there) now uses the Secret Service, where a token, a git credential and the database key are changed
    /// (`db rotate-key`); then the move is run again "to finish". It must put no older value over a newer one: the
    /// three are reported and kept in both stores (exit 65), the database still opens, the newer values still read.
    @Test(.enabled(if: Harness.hasSecretService, "moves to and from the Secret Service of the harness")) func rerunningAnInterruptedMoveNeverPutsAnOlderValueOverANewerOne() throws {
        let bus = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        try #require(!bus.isEmpty, "the harness's bus")
        let viaBus = ["DBUS_SESSION_BUS_ADDRESS": bus]
        let app = ["--app", "move-rerun-\(UUID().uuidString.prefix(8).lowercased())"]
        let credential = "protocol=https\nhost=git.example\nusername=ops\npassword="
        #expect(try tool(app + ["tasks", "add", "Keep", "me", "readable"]).status == 0)
        #expect(try tool(app + ["token", "set", "deploy"], input: "old-deploy").status == 0)
        #expect(try tool(app + ["git-credential", "store"], input: credential + "old-pw\n").status == 0)
        // An interrupted move, made exact: the key file as it was before the move, with every item also moved.
        let keyFileCopy = work.path + "/keys-before-move"
        try FileManager.default.copyItem(atPath: keyFile, toPath: keyFileCopy)
        let first = try tool(app + ["--keystore", "file", "keystore", "move", "--to", "secret-service"], extra: viaBus)
        #expect(first.status == 0 && first.stdout.contains("moved 3 item(s)"), "\(first.stdout)\(first.stderr)")
        try FileManager.default.removeItem(atPath: keyFile)
        try FileManager.default.copyItem(atPath: keyFileCopy, toPath: keyFile)
        // With the bus present the Secret Service is the store; newer values are made there.
        #expect(try tool(app + ["token", "set", "--force", "deploy"], input: "new-deploy", extra: viaBus).status == 0)
        #expect(try tool(app + ["git-credential", "store"], input: credential + "new-pw\n", extra: viaBus).status == 0)
        let rotated = try tool(app + ["db", "rotate-key"], extra: viaBus)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let keysBefore = try tool(app + ["--json", "db", "keys", "list"], extra: viaBus).stdout
        let fileBefore = try sha256(keyFile)

        let rerun = try tool(app + ["--keystore", "file", "keystore", "move", "--to", "secret-service"], extra: viaBus)
        #expect(rerun.status == 65, "\(rerun.stdout)\(rerun.stderr)")
        for kind in ["token 'deploy'", "git credential '", "database key '"] {
            #expect(rerun.stderr.contains("kept both copies of \(kind)"), "\(rerun.stderr)")
        }
        #expect(rerun.stderr.contains("a move never replaces a value"), "\(rerun.stderr)")
        #expect(!rerun.stderr.contains("old-deploy") && !rerun.stderr.contains("new-deploy"), "no value in a message")
        let json = try tool(app + ["--json", "--keystore", "file", "keystore", "move", "--to", "secret-service"], extra: viaBus)
        #expect(json.status == 65)
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((document?["skipped"] as? [Any])?.count == 3, "\(json.stdout)")
        #expect(document?["moved"] as? Int == 0)

        // Nothing changed in either store, and the database opens with the key the Secret Service holds.
        #expect(try sha256(keyFile) == fileBefore)
        #expect(try tool(app + ["--json", "db", "keys", "list"], extra: viaBus).stdout == keysBefore)
        #expect(try tool(app + ["token", "get", "deploy"], extra: viaBus).stdout == "new-deploy")
        let got = try tool(app + ["git-credential", "get"], input: "protocol=https\nhost=git.example\n", extra: viaBus)
        #expect(got.stdout.contains("password=new-pw"), "\(got.stderr)")
        let listed = try tool(app + ["tasks", "list"], extra: viaBus)
        #expect(listed.status == 0 && listed.stdout.contains("Keep me readable"), "\(listed.stderr)")
        #expect(try tool(app + ["--keystore", "file", "token", "get", "deploy"]).stdout == "old-deploy")
        // Leave the harness's keyring as it was.
        _ = try tool(app + ["db", "delete", "--yes", "--delete-keys"], extra: viaBus)
        _ = try tool(app + ["token", "delete", "deploy"], extra: viaBus)
        _ = try tool(app + ["git-credential", "erase"], input: "protocol=https\nhost=git.example\nusername=ops\n", extra: viaBus)
    }

    /// kill -9 at many moments of `keystore move`: every item stays readable from one store or the other (or both),
    /// never from neither; running the move again finishes it.
    @Test(.enabled(if: Harness.hasSecretService, "moves to and from the Secret Service of the harness")) func aMoveKilledAtAnyMomentNeverLosesAnItem() throws {
        let bus = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        try #require(!bus.isEmpty, "the harness's bus")
        let extra = ["DBUS_SESSION_BUS_ADDRESS": bus]
        let names = (1...16).map { "move-\($0)" }
        for name in names {
            #expect(try tool(["--keystore", "file", "token", "set", name], input: "value-of-\(name)", extra: extra).status == 0)
        }
        var environment = try headless(cacheSeconds: 0, extra: extra)
        let passfile = work.path + "/pass-move"
        try "correct horse battery\n".write(toFile: passfile, atomically: true, encoding: .utf8)
        environment["PASSFILE"] = passfile
        environment["SS"] = product("securestore")
        func readable(_ name: String) throws -> Bool {
            for store in ["file", "secret-service"] {
                let got = try tool(["--keystore", store, "token", "get", name], extra: extra)
                if got.status == 0 && got.stdout == "value-of-\(name)" { return true }
            }
            return false
        }
        for moment in 1...6 {
            _ = try run(
                ["bash", "-c",
                 "\"$SS\" --passphrase-fd 3 --keystore file keystore move --to secret-service 3<\"$PASSFILE\" & p=$!; "
                    + "sleep 0.\(moment)\(moment); kill -9 $p 2>/dev/null; wait $p; true"],
                environment: environment)
            for name in names { #expect(try readable(name), "after a kill at moment \(moment), '\(name)' is in neither store") }
            // Moved back for the next round, as far as it went (also a move that may be killed: not here).
            let back = try tool(["--keystore", "secret-service", "keystore", "move", "--to", "file"], extra: extra)
            #expect(back.status == 0, "\(back.stderr)")
        }
        let finished = try tool(["--keystore", "file", "keystore", "move", "--to", "secret-service"], extra: extra)
        #expect(finished.status == 0, "\(finished.stderr)")
        for name in names {
            #expect(try tool(["--keystore", "secret-service", "token", "get", name], extra: extra).stdout == "value-of-\(name)")
        }
        #expect(try tool(["--keystore", "file", "token", "list"], extra: extra).stdout.contains("move-") == false)
        // Leave the harness's keyring as it was.
        for name in names { _ = try tool(["--keystore", "secret-service", "token", "delete", name], extra: extra) }
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-creds"),
            "needs Debian's systemd-creds: `make deps` installs systemd where it can; the Debian 13 root leaves systemd out"))
    func systemdCredentialsMadeBySystemdCredsAreReadAndNeverWritten() throws {
        let credentials = work.path + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try "ghp_fromSystemd".write(toFile: work.path + "/plain", atomically: true, encoding: .utf8)
        let encrypted = work.path + "/deploy.cred"
        let made = try run(["systemd-creds", "encrypt", "--name=securestore@deploy", work.path + "/plain", encrypted])
        try #require(made.status == 0, "systemd-creds encrypt: \(made.stderr)")
        // What systemd does for LoadCredentialEncrypted=securestore@deploy:…: decrypt into the service's folder.
        let opened = try run(["systemd-creds", "decrypt", "--name=securestore@deploy", encrypted, credentials + "/securestore@deploy"])
        try #require(opened.status == 0, "systemd-creds decrypt: \(opened.stderr)")
        let extra = ["CREDENTIALS_DIRECTORY": credentials]
        let got = try tool(["--keystore", "systemd", "token", "get", "deploy"], passphrase: nil, extra: extra)
        #expect(got.status == 0 && got.stdout == "ghp_fromSystemd", "\(got.stderr)")
        let set = try tool(["--keystore", "systemd", "token", "set", "other"], passphrase: nil, input: "x", extra: extra)
        #expect(set.status == 77)
        #expect(set.stderr.contains("systemd credentials are read-only"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: credentials) == ["securestore@deploy"])
        let unset = try tool(["--keystore", "systemd", "token", "get", "deploy"], passphrase: nil)
        #expect(unset.status == 69)
        #expect(unset.stderr.contains("CREDENTIALS_DIRECTORY is not set"))
    }

    /// A service reads its task database from systemd credentials, as Docs/keystores.md says to set it up: the database
    /// made where keys can be stored, its key and a token written by `keystore credential` into `systemd-creds
    /// encrypt`, decrypted as `LoadCredentialEncrypted=` does into the service's folder, then read with `--keystore
    /// systemd`. A token credential written with `echo` keeps no newline; a symbolic link is refused by name; a
    /// database that does not exist is refused there with nothing made on disk.
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-creds"),
            "needs Debian's systemd-creds: `make deps` installs systemd where it can; the Debian 13 root leaves systemd out"))
    func aDatabaseKeyAndATokenProvisionedAsSystemdCredentialsOpenTheDatabase() throws {
        #expect(try tool(["tasks", "add", "Served", "by", "a", "unit"]).status == 0)
        #expect(try tool(["token", "set", "deploy"], input: "ghp_forTheUnit").status == 0)
        let store = work.path + "/credstore"
        let credentials = work.path + "/run-credentials"
        for folder in [store, credentials] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        var environment = try headless()
        environment["PASSFILE"] = try passphraseFile()
        environment["SS"] = product("securestore")
        environment["STORE"] = store
        environment["CREDS"] = credentials
        // The steps of Docs/keystores.md, "A service's database": encrypt each credential, then what systemd does at start.
        for selector in ["--database tasks", "--token deploy"] {
            let provisioned = try run(
                ["bash", "-c", """
                    set -euo pipefail
                    name=$("$SS" --passphrase-fd 3 keystore credential \(selector) --name-only 3<"$PASSFILE")
                    "$SS" --passphrase-fd 3 keystore credential \(selector) 3<"$PASSFILE" \
                        | systemd-creds encrypt --name="$name" - "$STORE/$name"
                    systemd-creds decrypt --name="$name" "$STORE/$name" "$CREDS/$name"
                    """], environment: environment)
            #expect(provisioned.status == 0, "\(selector): \(provisioned.stderr)")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: credentials).sorted()
        #expect(names.count == 2 && names.contains("securestore@deploy"), "\(names)")
        #expect(names.contains { $0.hasPrefix("securestore.database-key@") && $0.hasSuffix("%2Ftasks.db") }, "\(names)")
        let unit = ["CREDENTIALS_DIRECTORY": credentials]
        let listed = try tool(["--keystore", "systemd", "tasks", "list"], passphrase: nil, extra: unit)
        #expect(listed.status == 0 && listed.stdout.contains("Served by a unit"), "\(listed.stderr)")
        #expect(try tool(["--keystore", "systemd", "token", "get", "deploy"], passphrase: nil, extra: unit).stdout == "ghp_forTheUnit")
        // Asked for what is not there: a clear error, nothing printed, the key file unchanged.
        let sealed = try sha256(keyFile)
        let noToken = try tool(["keystore", "credential", "--token", "absent"])
        #expect(noToken.status == 66 && noToken.stderr.contains("there is no token 'absent'") && noToken.stdout.isEmpty, "\(noToken.stderr)")
        let noDatabase = try tool(["keystore", "credential", "--database", "absent"])
        #expect(noDatabase.status == 66 && noDatabase.stdout.isEmpty, "\(noDatabase.stderr)")
        let neither = try tool(["keystore", "credential"])
        #expect(neither.status == 64 && neither.stderr.contains("give one of --token NAME and --database NAME"), "\(neither.stderr)")
        #expect(try sha256(keyFile) == sealed)
        #expect(!FileManager.default.fileExists(atPath: home + "/data/securestore/absent.db"))
        // The value is not printed on a terminal.
        let onTerminal = try run(["script", "-qec", "\(product("securestore")) --passphrase-fd 3 keystore credential --token deploy 3<\(try passphraseFile())", "/dev/null"], environment: try headless())
        #expect(!onTerminal.stdout.contains("ghp_forTheUnit"), "\(onTerminal.stdout)")
        // `echo tok > file`: the newline is not part of the token.
        try "ghp_echoed\n".write(toFile: credentials + "/securestore@echoed", atomically: true, encoding: .utf8)
        #expect(try tool(["--keystore", "systemd", "token", "get", "echoed"], passphrase: nil, extra: unit).stdout == "ghp_echoed")
        // A symbolic link is refused by name.
        try FileManager.default.createSymbolicLink(atPath: credentials + "/securestore@linked", withDestinationPath: credentials + "/securestore@echoed")
        let linked = try tool(["--keystore", "systemd", "token", "get", "linked"], passphrase: nil, extra: unit)
        #expect(linked.status == 65 && linked.stderr.contains("is a symbolic link, not a file systemd put there"), "\(linked.stderr)")
        // A database that is not there: refused, nothing made.
        let nowhere = work.path + "/service-data"
        let refused = try tool(["--keystore", "systemd", "--data-dir", nowhere, "tasks", "add", "x"], passphrase: nil, extra: unit)
        #expect(refused.status == 77 && refused.stderr.contains("are read-only: its key cannot be stored there"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: nowhere))
    }

    /// What a person at a terminal meets (a pseudo-terminal from `script`, lines typed one after another): the
    /// passphrase is asked on the terminal even with stderr redirected, as ssh and pinentry ask (`T=$(securestore token
    /// get gh 2>/dev/null)`); `token set` on a new key file says where the token goes and asks the new passphrase
    /// before the secret.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs script(1) for a terminal"))
    func aPersonAtATerminalIsAskedOnItWithStderrRedirectedAndThePassphraseComesFirst() throws {
        var environment = try headless()
        environment["SECURESTORE_PROMPT"] = nil
        environment["SS"] = product("securestore")
        func typed(_ lines: [String], _ command: String) throws -> ProcessResult {
            // Each line after a pause: the prompt flushes what was typed before it (TCSAFLUSH), as a terminal does.
            let feed = lines.map { "sleep 1.5; printf '%s\\n' '\($0)'" }.joined(separator: "; ")
            return try run(["bash", "-c", "{ \(feed); sleep 2; } | script -qec '\(command)' /dev/null"], environment: environment)
        }
        let made = try typed(
            ["correct horse battery", "correct horse battery", "ghp_typed", "ghp_typed"], "\"$SS\" --keystore file token set gh")
        let screen = made.stdout
        let whereItGoes = try #require(screen.range(of: "token 'gh' goes to the key file"), "\(screen)")
        let newPassphrase = try #require(screen.range(of: "New passphrase for the key file"), "\(screen)")
        let secret = try #require(screen.range(of: "Secret for gh"), "\(screen)")
        #expect(whereItGoes.lowerBound < newPassphrase.lowerBound && newPassphrase.lowerBound < secret.lowerBound, "\(screen)")
        #expect(try tool(["token", "get", "gh"]).stdout == "ghp_typed")
        let read = try typed(["correct horse battery"], "T=$(\"$SS\" --keystore file token get gh 2>/dev/null); echo \"got=$T\"")
        #expect(read.stdout.contains("Passphrase for the key file") && read.stdout.contains("got=ghp_typed"), "\(read.stdout)")
    }

    @Test func theSecretServiceAskedForWithNoBusCreatesNothing() throws {
        let data = work.path + "/never-made"
        let got = try tool(["--keystore", "secret-service", "--data-dir", data, "tasks", "add", "Nothing"], passphrase: nil)
        #expect(got.status == 69, "\(got.stderr)")
        #expect(got.stderr.contains("--keystore file"), "\(got.stderr)")
        #expect(!FileManager.default.fileExists(atPath: data), "a failed open made \(data)")
        let bad = try tool(["--keystore", "vault", "tasks", "list"], passphrase: nil)
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--keystore must be one of secret-service, file, systemd"))
    }
}

/// A session bus with no Secret Service on it (nobody owns `org.freedesktop.secrets` and no service file can start
/// it: a container or CI job under dbus-run-session): the automatic choice is the key file, saying why.
@Suite struct BusWithoutASecretServiceTests {
    @Test(.enabled(if: Prerequisites.installed("dbus-run-session"), "dbus-run-session is not installed"))
    func aBusWithNoProviderUsesTheKeyFileAndSaysWhy() throws {
        let work = try TemporaryDirectory()
        let services = work.path + "/no-services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: false)
        let config = work.path + "/bus.conf"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:tmpdir=\(work.path)</listen>
              <auth>EXTERNAL</auth>
              <servicedir>\(services)</servicedir>
              <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow own="*"/></policy>
            </busconfig>
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let passphrase = work.path + "/passphrase"
        try "a bus but no keyring\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        for name in ["DBUS_SESSION_BUS_ADDRESS", "SECURESTORE_KEYSTORE", "SECURESTORE_PASSPHRASE_FD"] { environment[name] = nil }
        environment["HOME"] = work.path + "/home"
        environment["XDG_DATA_HOME"] = work.path + "/data"
        environment["XDG_RUNTIME_DIR"] = work.path
        environment["SECURESTORE_CACHE_TIMEOUT"] = "0"
        let app = uniqueApp()
        let script = "\"$0\" --app \(app) --passphrase-fd 3 token set api 3<'\(passphrase)' && echo ===; "
            + "exec \"$0\" --app \(app) --passphrase-fd 3 keystore status 3<'\(passphrase)'"
        let result = try run(
            ["dbus-run-session", "--config-file=" + config, "--", "bash", "-c", script, product("securestore")],
            input: Data("bus-without-keyring".utf8), environment: environment)
        let keyFile = work.path + "/data/securestore/keys.sealed"
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains(
            "securestore: no Secret Service (such as gnome-keyring or KeePassXC) answers on the session bus here, so keys "
                + "and tokens go to the key file '\(keyFile)'"), "\(result.stderr)")
        #expect(result.stdout.contains("===\nstore: file (the key file '\(keyFile)')"), "\(result.stdout)")
        #expect(result.stdout.contains("token: api"))
        #expect(FileManager.default.fileExists(atPath: keyFile))
    }
}

/// The no-D-Bus pass of `make test` (Tests/Harness/with-keyfile) is what it says: no bus can be found, so the tool
/// itself picks the key file, and the suites that run there run on it.
@Suite struct NoDBusPassTests {
    @Test(.enabled(if: Harness.isKeyFile, "only in the no-D-Bus pass"))
    func noBusCanBeFoundAndTheToolPicksTheKeyFile() throws {
        let environment = ProcessInfo.processInfo.environment
        #expect(environment["DBUS_SESSION_BUS_ADDRESS"] == nil)
        let runtime = try #require(environment["XDG_RUNTIME_DIR"])
        #expect(!FileManager.default.fileExists(atPath: runtime + "/bus"))
        if getuid() == 0 {
            #expect(!FileManager.default.fileExists(atPath: "/run/dbus/system_bus_socket"), "hidden by the private mount namespace")
        }
        let session = try run(["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                               "--method", "org.freedesktop.DBus.GetId"])
        #expect(session.status != 0, "a session bus answered: \(session.stdout)")
        let status = try securestore(["keystore", "status"], app: uniqueApp())
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.hasPrefix("store: file (the key file '\(try #require(environment["XDG_DATA_HOME"]))/securestore/keys.sealed')"),
            "\(status.stdout)")
    }
}

struct LoginSessionError: Error { let message: String }

/// A login session keyring of a test's own, as pam_keyinit gives an SSH or console login: a named keyring (kept in
/// the user or session keyring, searchable by this user, gone after 10 minutes at the latest) that each command run with
/// ``command`` joins as its session keyring (`keyctl session NAME`).
struct LoginSession {
    let name = "securestore-test-login-" + UUID().uuidString.prefix(12).lowercased()
    let id: String

    /// Where the named keyring is kept, so that this process possesses it (and may set its permissions): the
    /// session keyring when the test runs in one (the with-keyfile pass), else the user keyring.
    let parent = LoginSession.processHasNone ? "@u" : "@s"

    init() throws {
        let made = try run(["keyctl", "newring", name, parent])
        id = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard made.status == 0, !id.isEmpty,
            try run(["keyctl", "setperm", id, "0x3f3f0000"]).status == 0,
            try run(["keyctl", "timeout", id, "600"]).status == 0
        else { throw LoginSessionError(message: "keyctl newring/setperm failed: \(made.stderr)") }
    }

    /// The prefix that runs a command in this login session.
    var command: [String] { ["keyctl", "session", name] }

    func end() {
        _ = try? run(["keyctl", "clear", id])
        _ = try? run(["keyctl", "unlink", id, parent])
    }

    /// Whether this process has no login session keyring (its session keyring is the user's `_uid_ses.<uid>`).
    static var processHasNone: Bool {
        guard let shown = try? run(["keyctl", "rdescribe", "@s"]) else { return false }
        return shown.stdout.contains(";_uid_ses.")
    }
}

