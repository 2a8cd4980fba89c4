// Scenarios for the keyed database (SecureStore); see main.swift.
//
//   securestore-stress keyed rotate-crash STEP DATA_DIR APP NAME
//       Opens the keyed database NAME of APP in DATA_DIR (the keyring is the session bus's), rotates its
//       key and kills itself with SIGKILL right after rotation step STEP (1...9, see
//       KeyedDatabase.RotationStep) is done. Exit 0 when STEP is 0 (no kill) and the rotation succeeded,
//       1 with the error on stderr otherwise; killed by SIGKILL when the step was reached.
//
//   securestore-stress keyed restore-crash STEP DATA_DIR APP NAME BACKUP
//       Restores BACKUP as the keyed database NAME of APP in DATA_DIR with a key from the keyring and kills
//       itself with SIGKILL right after restore step STEP (1...8, see KeyedDatabase.RestoreStep). Exit 0
//       when STEP is 0 and the restore succeeded, 1 with the error on stderr otherwise.
//
//   securestore-stress keyed upgrade-crash STEP DATA_DIR APP NAME
//       Opens the keyed database NAME (a file written as SecureStore 0.1 did, with its key item under the
//       name) and kills itself with SIGKILL right after upgrade step STEP (1...3, see
//       KeyedDatabase.UpgradeStep). Exit 0 when the open finished without reaching STEP.
//
//   securestore-stress keyed write DATA_DIR APP NAME WRITER COUNT
//       Opens (or creates) the keyed database and inserts COUNT rows (WRITER, 0..<COUNT) into
//       `entry(writer, n)`, each in its own transaction. Several run at once against a new database to
//       show that exactly one key is made. Exit 0 on success, 1 with the error on stderr.
import EncryptedDatabase
import Foundation
import Keychain
@_spi(Testing) import SecureStore
import Glibc

/// Runs one keyed-database scenario and returns the process exit status.
func runKeyedDatabaseStress(_ arguments: [String]) -> Int32 {
    if arguments.first == "write", arguments.count == 6, let writer = Int(arguments[4]), let count = Int(arguments[5]) {
        do {
            let paths = try AppPaths(app: arguments[2], dataDirectory: URL(fileURLWithPath: arguments[1], isDirectory: true))
            let database = try KeyedDatabase(paths: paths, name: arguments[3], keychain: stressKeychain())
            try database.queue.write { db in
                try db.execute("CREATE TABLE IF NOT EXISTS entry (writer INTEGER NOT NULL, n INTEGER NOT NULL)")
            }
            for n in 0..<count {
                try database.queue.write { db in
                    try db.execute("INSERT INTO entry (writer, n) VALUES (?, ?)", [writer, n])
                }
            }
            try database.close()
            return 0
        } catch {
            FileHandle.standardError.write(Data("securestore-stress keyed write: \(error)\n".utf8))
            return 1
        }
    }
    if arguments.first == "upgrade-crash", arguments.count == 5, let step = Int(arguments[1]) {
        do {
            let paths = try AppPaths(app: arguments[3], dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true))
            KeyedDatabase.observeUpgradeSteps { done in
                if done.rawValue == step { kill(getpid(), SIGKILL) }
            }
            try KeyedDatabase(paths: paths, name: arguments[4], keychain: stressKeychain(), createIfMissing: false).close()
            return 0
        } catch {
            FileHandle.standardError.write(Data("securestore-stress keyed upgrade-crash: \(error)\n".utf8))
            return 1
        }
    }
    if arguments.first == "restore-crash", arguments.count == 6, let step = Int(arguments[1]) {
        do {
            let paths = try AppPaths(app: arguments[3], dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true))
            try KeyedDatabase.restore(
                from: URL(fileURLWithPath: arguments[5]), paths: paths, name: arguments[4], keychain: stressKeychain()
            ) { done in
                if done.rawValue == step { kill(getpid(), SIGKILL) }
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("securestore-stress keyed restore-crash: \(error)\n".utf8))
            return 1
        }
    }
    guard arguments.first == "rotate-crash", arguments.count == 5, let step = Int(arguments[1]) else {
        FileHandle.standardError.write(
            Data(("usage: securestore-stress keyed rotate-crash STEP DATA_DIR APP NAME\n"
                + "       securestore-stress keyed restore-crash STEP DATA_DIR APP NAME BACKUP\n"
                + "       securestore-stress keyed upgrade-crash STEP DATA_DIR APP NAME\n"
                + "       securestore-stress keyed write DATA_DIR APP NAME WRITER COUNT\n").utf8))
        return 64
    }
    do {
        let paths = try AppPaths(app: arguments[3], dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true))
        let database = try KeyedDatabase(paths: paths, name: arguments[4], keychain: stressKeychain())
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
