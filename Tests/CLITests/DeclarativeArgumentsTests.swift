// The parser's declared arguments through the built tool (Docs/cli.md, "Arguments, rules and completion"): a missing
// positional, a broken rule (exclusive or required options), a value outside a fixed set are usage errors (exit 64,
// the message, the usage line) found before the command runs, so nothing on disk or in the keyring changes; and a
// positional completes to what its spec declares, never to what its name suggests.
import Foundation
import TestSupport
import Testing
@testable import SecureStoreCommands

/// One application with a task, a preference and a token: what a refused command must leave as it was.
private struct Scene {
    let app = uniqueApp()
    let data: TemporaryDirectory
    let task: String

    init() throws {
        data = try TemporaryDirectory()
        let added = try securestore(["--data-dir", data.path, "tasks", "add", "Buy milk"], app: app)
        #expect(added.status == 0, "\(added.stderr)")
        task = String(added.stdout.prefix(8))
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        #expect(try securestore(["token", "set", "github"], app: app, input: "ghp_kept\n").status == 0)
    }

    /// The preferences directory of the application (`$XDG_CONFIG_HOME/<app>`).
    var configDirectory: String {
        let environment = ProcessInfo.processInfo.environment
        return (environment["XDG_CONFIG_HOME"] ?? NSHomeDirectory() + "/.config") + "/" + app
    }

    /// Every file under the data and preferences directories with its bytes, and every keyring item of the
    /// application (tokens, database keys, sync keys, git credentials) with its secret.
    func state() throws -> [String: Data] {
        var state: [String: Data] = [:]
        for (path, data) in filesUnder(data.path) + filesUnder(configDirectory) { state[path] = data }
        for service in [app, app + ".database-key", app + ".sync-key", app + ".git"] {
            for account in try StoreClient.accounts(service: service) {
                state["keyring \(service) \(account)"] = Data((try StoreClient.lookup(service: service, account: account) ?? "").utf8)
            }
        }
        return state
    }

    /// Runs the tool for this application and its data directory.
    func run(_ arguments: [String], input: String = "") throws -> ProcessResult {
        try securestore(["--data-dir", data.path] + arguments, app: app, input: input)
    }

    func cleanUp() {
        _ = try? securestore(["token", "delete", "github"], app: app)
    }
}

@Suite struct DeclarativeArgumentsTests {
    /// `expected`: the first line of standard error, after `securestore: `; the usage line follows it.
    private func expectUsageError(
        _ result: ProcessResult, _ expected: String, usage: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == 64, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "securestore: " + expected, sourceLocation: sourceLocation)
        #expect(lines.dropFirst().first == "usage: " + usage, sourceLocation: sourceLocation)
    }

    @Test func aMissingPositionalIsAUsageErrorWithTheUsageLineAndChangesNothing() throws {
        let scene = try Scene()
        defer { scene.cleanUp() }
        let before = try scene.state()
        expectUsageError(
            try scene.run(["tasks", "rename", scene.task]), "missing argument TITLE",
            usage: "securestore tasks rename [options] ID TITLE")
        expectUsageError(try scene.run(["prefs", "delete"]), "missing argument KEY", usage: "securestore prefs delete KEY")
        // The secret on standard input is never read: the name is missing.
        expectUsageError(
            try scene.run(["token", "set"], input: "ghp_replacement\n"), "missing argument NAME",
            usage: "securestore token set [options] NAME")
        expectUsageError(
            try scene.run(["sync", "restore-conflict"]), "missing argument ID",
            usage: "securestore sync restore-conflict [options] ID")
        #expect(try scene.state() == before)
    }

    @Test func exclusiveAndRequiredOptionsAreCheckedBeforeTheCommandRuns() throws {
        let scene = try Scene()
        defer { scene.cleanUp() }
        let before = try scene.state()
        let folder = scene.data.path + "/remote"
        // `sync init --folder` makes its folder and a sync key: refused first, neither exists.
        expectUsageError(
            try scene.run(["sync", "init", "--git", scene.data.path + "/repo.git", "--folder", folder]),
            "--git and --folder cannot be combined", usage: "securestore sync init [options]")
        expectUsageError(
            try scene.run(["sync", "init"]), "give one of --git URL and --folder PATH", usage: "securestore sync init [options]")
        #expect(!FileManager.default.fileExists(atPath: folder))
        expectUsageError(
            try scene.run(["tasks", "list", "--done", "--open"]), "give at most one of --all, --done, --open (got --done --open)",
            usage: "securestore tasks list [options]")
        // A global flag in a rule: `--print` would put the secret beside the JSON.
        expectUsageError(
            try scene.run(["--json", "token", "generate", "github", "--print", "--force"]), "--print and --json cannot be combined",
            usage: "securestore token generate [options] NAME")
        expectUsageError(
            try scene.run(["keystore", "move"]), "--to is required (file or secret-service)", usage: "securestore keystore move [options]")
        #expect(try scene.state() == before)
    }

    @Test func aValueOutsideAFixedSetIsRefusedNamingTheSet() throws {
        let scene = try Scene()
        defer { scene.cleanUp() }
        let before = try scene.state()
        let output = scene.data.path + "/tasks.xml"
        expectUsageError(
            try scene.run(["tasks", "export", "--format", "xml", "--output", output]), "--format takes one of jsonl, csv, json, not 'xml'",
            usage: "securestore tasks export [options]")
        #expect(!FileManager.default.fileExists(atPath: output))
        expectUsageError(
            try scene.run(["tasks", "import", "--on-duplicate=merge"], input: "{\"title\":\"Call mum\"}\n"),
            "--on-duplicate takes one of skip, replace, fail, not 'merge'", usage: "securestore tasks import [options] [FILE]")
        expectUsageError(
            try scene.run(["keystore", "move", "--to", "kwallet"]), "--to must be file or secret-service",
            usage: "securestore keystore move [options]")
        expectUsageError(
            try scene.run(["completion", "tcsh"]), "unknown shell 'tcsh' (expected one of: bash, zsh, fish)",
            usage: "securestore completion SHELL")
        expectUsageError(
            try scene.run(["sync", "restore-conflict", "-3"]), "unknown option '-3'", usage: "securestore sync restore-conflict [options] ID")
        expectUsageError(
            try scene.run(["sync", "restore-conflict", "--", "-3"]), "ID must be a conflict number from 'securestore sync conflicts'",
            usage: "securestore sync restore-conflict [options] ID")
        #expect(try scene.state() == before)
        // The task is still the only one, with its title.
        let list = try scene.run(["tasks", "list"])
        #expect(list.stdout == "\(scene.task)  [ ]  Buy milk\n")
    }

    @Test func aPositionalCompletesToWhatItsSpecDeclares() throws {
        let scene = try Scene()
        defer { scene.cleanUp() }
        let line = "securestore --app \(scene.app) --data-dir \(scene.data.path)"
        let directory = try TemporaryDirectory()
        let (result, replies) = try completeInBash(
            [
                "securestore completion ", "securestore completion z", "securestore git-credential ",
                "\(line) tasks show ", "\(line) sync remove-device ", "\(line) sync restore-conflict ",
                "securestore --app \(scene.app) prefs move-to-keychain ", "securestore --app \(scene.app) token get g",
                "securestore --keystore s",
            ], directory: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)
        #expect(replies.count == 9)
        guard replies.count == 9 else { return }
        #expect(replies[0] == ["bash", "zsh", "fish"])
        #expect(replies[1] == ["zsh"])
        #expect(replies[2] == ["get", "store", "erase"])
        #expect(replies[3] == [scene.task])
        // A device ID and a conflict number are not task IDs, though their argument is named ID too.
        #expect(replies[4].isEmpty)
        #expect(replies[5].isEmpty)
        #expect(replies[6] == ["theme"])
        #expect(replies[7] == ["github"])
        #expect(replies[8] == ["secret-service", "systemd"])

    }

    @Test(.enabled(if: Prerequisites.installed("zsh"), "zsh is not installed ('make deps' installs it)"))
    func zshCompletesAPositionalToItsWords() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/_securestore"
        try Data(try securestore(["completion", "zsh"]).stdout.utf8).write(to: URL(fileURLWithPath: path))
        let program = #"""
            source "$1" >/dev/null 2>&1
            compadd() { [[ $1 == -Q ]] && shift; shift; print -r -- "> $*"; }
            c() { words=("$@"); CURRENT=${#words}; _securestore; }
            c "$2" completion ''
            c "$2" git-credential ''
            """#
        let zsh = try run(["zsh", "-f", "-c", program, "zsh", path, product("securestore")])
        #expect(zsh.status == 0, "\(zsh.stderr)")
        #expect(zsh.stdout == "> bash zsh fish\n> get store erase\n")
    }

    @Test(.enabled(if: Prerequisites.installed("fish"), "fish is not installed ('make deps' installs it)"))
    func fishCompletesAPositionalToItsWordsAndADeviceIDToNoTask() throws {
        let scene = try Scene()
        defer { scene.cleanUp() }
        let directory = try TemporaryDirectory()
        let path = directory.path + "/securestore.fish"
        try Data(try securestore(["completion", "fish"]).stdout.utf8).write(to: URL(fileURLWithPath: path))
        let tool = product("securestore")
        for features in [[], ["--features", "qmark-noglob"]] {
            let fish = try run(
                ["fish"] + features + [
                    "--no-config", "-c",
                    "source '\(path)'; complete -C '\(tool) completion '; echo ==; "
                        + "complete -C '\(tool) --app \(scene.app) --data-dir \(scene.data.path) sync remove-device '; echo ==; "
                        + "complete -C '\(tool) --app \(scene.app) --data-dir \(scene.data.path) tasks show '",
                ])
            #expect(fish.status == 0, "\(features): \(fish.stderr)")
            // fish sorts what it offers.
            let parts = fish.stdout.components(separatedBy: "==\n").map { $0.split(separator: "\n").map(String.init) }
            #expect(parts.count == 3, "\(features): \(fish.stdout)")
            guard parts.count == 3 else { continue }
            #expect(Set(parts[0]) == ["bash", "zsh", "fish"], "\(features)")
            #expect(parts[1].isEmpty, "\(features)")
            #expect(parts[2] == [scene.task], "\(features)")
        }
    }

    @Test func everyOptionAndArgumentThatCompletesSaysSoInItsSpec() {
        // What the scripts offer comes from the specs: the options that take a fixed set of words complete to
        // exactly the words they accept.
        let root = Command(name: "securestore", abstract: "test", subcommands: commandTree())
        for node in completionNodes(root) {
            for option in node.command.options + GlobalOption.all {
                guard case .words(let words)? = completion(ofOption: option) else { continue }
                #expect(!words.isEmpty, "\(node.path) --\(option.name)")
                for word in words {
                    #expect(option.accepts(word), "\(node.path) --\(option.name) \(word)")
                }
            }
            for argument in node.command.arguments {
                guard case .words(let words)? = node.completion(ofArgument: argument) else { continue }
                for word in words { #expect(argument.refusal(of: word) == nil, "\(node.path) \(argument.name) \(word)") }
            }
        }
    }
}
