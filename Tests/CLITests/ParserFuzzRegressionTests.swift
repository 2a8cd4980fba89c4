// Inputs the argument-parser fuzz target (Tests/Fuzz/ArgumentParser) found, kept as tests.
import Foundation
import TestSupport
import Testing
@testable import SecureStoreCommands

/// The fuzz target's property: a usage error is one line of printable text, so an argument it repeats
/// cannot bring a newline or a terminal escape sequence with it.
@Suite struct ParserFuzzRegressionTests {
    let parser = Parser(root: Command(name: "securestore", abstract: "test", subcommands: commandTree()))

    private func usageError(_ arguments: [String]) -> UsageError? {
        do {
            _ = try parser.parse(arguments)
            return nil
        } catch {
            return error as? UsageError
        }
    }

    /// First found: `token list -n '' $'\x10'` (the fuzzer's own tree) → "unexpected argument" with U+0010.
    @Test(arguments: [
        (["token", "get", "name", "\u{10}"], "unexpected argument: this command takes 1, not 2"),
        (["tok\nen"], "unknown command 'tok\\u{A}en'"),
        (["token", "get", "--\u{1B}[31mred"], "unknown option '--\\u{1B}[31mred'"),
        (["token", "get", "-\u{7F}"], "unknown option '-\\u{7F}'"),
        (["token", "get", "a", "\u{202E}txt.exe"], "unexpected argument: this command takes 1, not 2"),
        (["prefs", "\u{85}x\u{2028}y"], "unknown command '\\u{85}x\\u{2028}y' (expected one of: get, set"),
    ])
    func usageErrorsEscapeWhatATerminalWouldActOn(arguments: [String], message: String) throws {
        // message: the start of the expected message (the list of known commands may grow).
        let error = try #require(usageError(arguments))
        #expect(error.message.hasPrefix(message), "message: \(error.message)")
        #expect(!error.message.unicodeScalars.contains { $0.properties.generalCategory == .control })
    }

    @Test func printableTextIsQuotedAsItIs() {
        #expect(UsageError.quoted("größe ✓ \"x\" \\n") == "'größe ✓ \"x\" \\n'")
        #expect(UsageError.quoted("") == "''")
        #expect(usageError(["tokn"])?.message == "unknown command 'tokn' (did you mean 'token'? expected one of: token, tasks, db, prefs, keystore, lock, sync, git-credential, completion, man)")
        #expect(usageError(["zzz"])?.message == "unknown command 'zzz' (expected one of: token, tasks, db, prefs, keystore, lock, sync, git-credential, completion, man)")
    }

    @Test func anIntegerOptionQuotesTheTextItRefuses() {
        let limit = Option<Int>.wholeNumber("limit", help: "At most N.")
        let invocation = Invocation(
            path: ["token", "list"], flags: [], values: ["limit": "1\n2"], arguments: [], global: GlobalOptions())
        #expect(throws: UsageError.self) { try invocation[limit] }
        do {
            _ = try invocation[limit]
        } catch let error as UsageError {
            #expect(error.message == "--limit takes a whole number of at least 0, not '1\\u{A}2'")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    /// What a user sees: one error line, the usage, the pointer to help; exit status 64.
    @Test func theToolPrintsAnArgumentWithANewlineOnOneLine() throws {
        let result = try securestore(["token", "get", "name", "two\nlines\u{1B}]0;title\u{07}"])
        #expect(result.status == 64)
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4, "stderr: \(result.stderr)")  // three lines and the final newline
        // The extra argument is not repeated at all (it may be a secret typed in the wrong place).
        #expect(lines.first?.hasPrefix("securestore: unexpected argument: this command takes 1, not 2") == true)
        #expect(!result.stderr.contains("two"))
        #expect(!result.stderr.contains("\u{1B}"))
    }
}
