import Foundation
import TestSupport
import Testing

/// Every `securestore …` line of the ```sh blocks of README.md and Docs/*.md runs as written against the built tool, in the
/// harness's throw-away keyring and directories.
@Suite(.serialized) struct ReadmeExamplesTests {
    init() throws { try Harness.require() }

    /// The repository's root: this file is Tests/CLITests/ReadmeExamplesTests.swift.
    private var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The command lines of the ```sh blocks of README.md and then Docs/*.md that run `securestore`, comments
    /// removed, in order.
    private func readmeCommands() throws -> [String] {
        let docs = root.appendingPathComponent("Docs")
        let files = [root.appendingPathComponent("README.md")]
            + (try FileManager.default.contentsOfDirectory(atPath: docs.path)).filter { $0.hasSuffix(".md") }.sorted()
            .map { docs.appendingPathComponent($0) }
        var commands: [String] = []
        for file in files {
            commands += try shellCommands(in: String(contentsOf: file, encoding: .utf8))
        }
        return commands
    }

    private func shellCommands(in text: String) -> [String] {
        var commands: [String] = []
        var inShell = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                inShell = line == "```sh"
                continue
            }
            guard inShell else { continue }
            // A comment starts at "  #" (none of the commands has one inside quotes).
            let command = String(line.components(separatedBy: "  #")[0]).trimmingCharacters(in: .whitespaces)
            if command.hasPrefix("securestore ") || command.contains("| securestore ") { commands.append(command) }
        }
        return commands
    }

    @Test func everySecureStoreLineOfTheReadmeRunsAsWritten() throws {
        let commands = try readmeCommands()
        #expect(commands.count >= 9, "the README's examples were found: \(commands)")
        let app = uniqueApp()
        // `securestore` on PATH is the built tool under this test's application name.
        let bin = try #require(Harness.root) + "/readme-bin-\(app)"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: bin) }
        let wrapper = bin + "/securestore"
        try "#!/bin/sh\nexec '\(product("securestore"))' --app '\(app)' \"$@\"\n".write(
            toFile: wrapper, atomically: true, encoding: .utf8)
        #expect(chmod(wrapper, 0o755) == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        let token = "ghp_readme_example_value"
        environment["TOKEN"] = token

        var lastTaskID: String?
        for written in commands {
            var command = written
            // The one example value that cannot exist beforehand: a task ID prefix (the task the README adds).
            for verb in ["done", "undo", "show", "rename", "delete"] where command.hasPrefix("securestore tasks \(verb) ") {
                guard let id = lastTaskID else { continue }
                let rest = command.dropFirst("securestore tasks \(verb) ".count).drop { $0 != " " }
                command = "securestore tasks \(verb) " + id.prefix(4) + rest
            }
            let result = try run(["/bin/sh", "-c", command], environment: environment)
            #expect(result.status == 0, "\(written): exit \(result.status): \(result.stderr)")
            if command.hasPrefix("securestore tasks add ") {
                lastTaskID = result.stdout.split(whereSeparator: { !$0.isHexDigit && $0 != "-" }).first.map(String.init)
            }
            if command == "securestore token get github" { #expect(result.stdout == token) }
            // With no D-Bus (with-keyfile) `securestore lock` forgot the key file's key: the person unlocks again.
            if command == "securestore lock" { try Harness.unlockKeyFile() }
        }
        #expect(lastTaskID != nil)
    }
}
