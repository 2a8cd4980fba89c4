// Scenarios for the keyed database (SecureStore); see main.swift.
//
//   securestore-stress keyed rotate-crash STEP DATA_DIR APP NAME
//       Opens the keyed database NAME of APP in DATA_DIR (the keyring is the session bus's), rotates its
//       key and kills itself with SIGKILL right after rotation step STEP (1...8, see
//       KeyedDatabase.RotationStep) is done. Exit 0 when STEP is 0 (no kill) and the rotation succeeded,
//       1 with the error on stderr otherwise; killed by SIGKILL when the step was reached.
import Foundation
import Keychain
import SecureStore
#if canImport(Glibc)
import Glibc
#endif

/// Runs one keyed-database scenario and returns the process exit status.
func runKeyedDatabaseStress(_ arguments: [String]) -> Int32 {
    guard arguments.first == "rotate-crash", arguments.count == 5, let step = Int(arguments[1]) else {
        FileHandle.standardError.write(
            Data("usage: securestore-stress keyed rotate-crash STEP DATA_DIR APP NAME\n".utf8))
        return 64
    }
    do {
        let paths = try AppPaths(app: arguments[3], dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true))
        let database = try KeyedDatabase(paths: paths, name: arguments[4], keychain: Keychain())
        try database.rotateKey { done in
            if done.rawValue == step { kill(getpid(), SIGKILL) }
        }
        try database.close()
        return 0
    } catch {
        FileHandle.standardError.write(Data("securestore-stress keyed rotate-crash: \(error)\n".utf8))
        return 1
    }
}
