// The securestore tool's entry point: the command tree, parsed and run. The executable (Sources/SecureStoreTool)
// only calls ``runSecureStoreTool()``; tests and the fuzzer import this module.
internal import Foundation
internal import Glibc
internal import SecureStoreCore

/// 0.2: the pinned file format (securestore-1), key items named by database id, retired keys, restore.
let version = "0.2.0"

let root = Command(
    name: "securestore", abstract: "secrets in the keyring or a key file, records in an encrypted database, settings in checked preferences.",
    subcommands: commandTree())

let parser = Parser(root: root)

/// The arguments, refused when one is not valid UTF-8 (CommandLine.arguments would repair it silently).
func validatedArguments() throws -> [String] {
    var arguments: [String] = []
    // `1..<argc` would trap when argc is 0 (an `execve` with an empty argv, which kernels before 5.18 allow).
    for index in stride(from: 1, to: Int(CommandLine.argc), by: 1) {
        guard let pointer = CommandLine.unsafeArgv[index], let argument = String(validatingCString: pointer) else {
            throw UsageError("argument \(index) is not valid UTF-8", path: [])
        }
        arguments.append(argument)
    }
    return arguments
}

/// Runs the tool with the process's arguments and returns its exit status (Docs/cli.md).
@MainActor package func runSecureStoreTool() -> Int32 {
    // ^C, SIGTERM and SIGHUP remove the temporary files of the command in progress, then end it by the signal.
    ScratchFiles.removeOnSignals()
    do {
        var arguments = try validatedArguments()
        // Installed as git-credential-securestore, git runs it as `git-credential-securestore get`.
        let program = URL(fileURLWithPath: CommandLine.arguments.first ?? "securestore").lastPathComponent
        if program == "git-credential-securestore" { arguments = ["git-credential"] + arguments }
        switch try parser.parse(arguments) {
        case .help(let path):
            Console.out(parser.help(path))
            return ExitStatus.success
        case .version:
            Console.out("securestore \(version)\n")
            return ExitStatus.success
        case .run(let command, let invocation):
            return try command.run?(invocation) ?? ExitStatus.software
        }
    } catch {
        return report(error, parser: parser)
    }
}

