// securestore-stress MODULE SCENARIO [ARG...]
//
// A separate process for tests that need one: writers killed with SIGKILL at random moments, several
// writers at once. Each module owns its own file of scenarios; this file only dispatches.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let module = arguments.first else {
    FileHandle.standardError.write(Data("usage: securestore-stress prefs|db|keychain|keyed|tasks|soak|cross|sync SCENARIO [ARG...]\n".utf8))
    exit(64)
}
let rest = Array(arguments.dropFirst())
switch module {
case "prefs": exit(runPreferencesStress(rest))
case "db": exit(runDatabaseStress(rest))
case "keychain": exit(runKeychainStress(rest))
case "keyed": exit(runKeyedDatabaseStress(rest))
case "tasks": exit(runTaskListStress(rest))
case "soak": exit(runSoakStress(rest))
case "cross": exit(runCrossVersionStress(rest))
case "sync": exit(runSyncCrossStress(rest))
default:
    FileHandle.standardError.write(Data("securestore-stress: unknown module '\(module)'\n".utf8))
    exit(64)
}
