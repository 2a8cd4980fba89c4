import Foundation
import TestSupport
import Testing

/// Parsing, help, version and usage errors of the built tool.
@Suite struct CLIBasicsTests {
    @Test func versionAndHelpAtEveryLevel() throws {
        let version = try securestore(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout == "securestore 0.2.0\n")

        let help = try securestore(["--help"])
        #expect(help.status == 0)
        for command in ["token", "prefs", "git-credential"] { #expect(help.stdout.contains("\n  \(command) ")) }

        let tokenSetHelp = try securestore(["token", "set", "--help"])
        #expect(tokenSetHelp.status == 0)
        #expect(tokenSetHelp.stdout.contains("usage: securestore token set [options] NAME"))
        #expect(tokenSetHelp.stdout.contains("--raw"))

        let bare = try securestore([])
        #expect(bare.status == 0)
        #expect(bare.stdout.hasPrefix("securestore — "))
    }

    @Test func usageErrorsPrintOneLineAndTheUsageAndExit64() throws {
        let unknown = try securestore(["tokn"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("securestore: unknown command 'tokn'"))
        #expect(unknown.stderr.contains("usage: securestore <command>"))

        let missing = try securestore(["token", "get"])
        #expect(missing.status == 64)
        #expect(missing.stderr.hasPrefix("securestore: missing argument NAME\nusage: securestore token get NAME\n"))

        let option = try securestore(["token", "list", "--bogus"])
        #expect(option.status == 64)
        #expect(option.stderr.hasPrefix("securestore: unknown option '--bogus'"))

        // A bare command group prints its help, as bare `securestore` does, with the same status (0).
        let bare = try securestore([])
        let noSubcommand = try securestore(["prefs"])
        #expect(noSubcommand.status == bare.status)
        #expect(noSubcommand.status == 0)
        #expect(noSubcommand.stdout.contains("usage: securestore prefs"))
        #expect(noSubcommand.stderr.isEmpty)
        // Global options work anywhere.
        #expect(try securestore(["tasks", "--version"]).stdout == (try securestore(["--version"])).stdout)

        let empty = try securestore(["token", "get", ""])
        #expect(empty.status == 64)
        #expect(empty.stderr.hasPrefix("securestore: NAME must not be empty"))

        let badApp = try securestore(["--app", "../etc", "token", "list"])
        #expect(badApp.status == 64)
        #expect(badApp.stderr.contains("application name"))

        let missingValue = try securestore(["--app"])
        #expect(missingValue.status == 64)
        #expect(missingValue.stderr.hasPrefix("securestore: --app needs a value"))
    }

    @Test func argumentsThatAreNotUTF8AreRefused() throws {
        // bash passes the raw byte 0xFF as an argument; Swift strings cannot carry it.
        let result = try run(["bash", "-c", "\"$0\" token get \"$(printf '\\377')\"", product("securestore")])
        #expect(result.status == 64)
        #expect(result.stderr.hasPrefix("securestore: argument 3 is not valid UTF-8"))
    }

    @Test func enormousArgumentsGetAClearErrorNotACrash() throws {
        let huge = String(repeating: "n", count: 100_000)  // under Linux's 128 KiB limit for one argument
        let result = try securestore(["token", "get", huge], app: uniqueApp())
        #expect(result.status == 64)
        #expect(result.stderr.hasPrefix("securestore: NAME must be at most 256 bytes"))
    }
}
