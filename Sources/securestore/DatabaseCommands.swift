import EncryptedDatabase
import Foundation
import Keychain
import SecureStore

private let nameOption = OptionSpec(name: "name", valueName: "NAME", help: "The database (default: tasks).")

/// The database name of an invocation (`--name`, default `tasks`).
func databaseName(_ invocation: Invocation) -> String { invocation.value("name") ?? "tasks" }

/// Opens the keyed database of an invocation (created with its key on first use).
func openDatabase(_ invocation: Invocation, _ context: Context) throws -> KeyedDatabase {
    try KeyedDatabase(paths: context.paths, name: databaseName(invocation), keychain: context.keychain)
}

/// Opens the keyed database of an invocation only if its file exists: maintenance commands (verify, backup,
/// recovery code, rotation) must not create an empty database and key — a typo in --name, --app or a
/// different XDG_DATA_HOME would otherwise hand out a recovery code for the wrong, empty database.
private func openExistingDatabase(_ invocation: Invocation, _ context: Context) throws -> KeyedDatabase {
    let name = databaseName(invocation)
    let info = try KeyedDatabase.info(paths: context.paths, name: name, keychain: context.keychain)
    guard info.exists else {
        throw CLIError(
            status: ExitStatus.notFound, message: "there is no database \(UsageError.quoted(name)) at \(info.path)",
            hint: "check --app, --name and --data-dir; 'securestore tasks add' creates the task database")
    }
    return try openDatabase(invocation, context)
}

/// `securestore db …`: the encrypted database and its key.
let dbCommand = Command(
    name: "db", abstract: "Inspect, verify, back up and re-key the encrypted database.",
    subcommands: [
        Command(
            name: "info", abstract: "Path, size, cipher settings, SQLCipher version and where the key lives (never the key).",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let info = try KeyedDatabase.info(paths: context.paths, name: databaseName(invocation), keychain: context.keychain)
                var encryption: CipherInfo?
                if info.exists && info.hasKey {
                    let database = try openDatabase(invocation, context)
                    encryption = try database.queue.cipherInfo()
                    try database.close()
                }
                if invocation.global.json {
                    var object: [String: Any] = [
                        "name": info.name, "path": info.path, "exists": info.exists,
                        "key": [
                            "service": info.keyService, "account": info.keyAccount ?? NSNull(), "collection": info.keyCollection,
                            "stored": info.hasKey, "retired": info.retiredKeyAccounts,
                        ] as [String: Any],
                        "rotationPending": info.rotationPending,
                    ]
                    if let id = info.databaseID { object["databaseId"] = id }
                    if let size = info.fileSize { object["size"] = size }
                    if let wal = info.walSize { object["walSize"] = wal }
                    if let encryption { object["cipher"] = encryption.jsonObject }
                    try Console.json(object)
                } else {
                    Console.out(info.description + "\n")
                    for line in encryption?.lines ?? [] { Console.out(line + "\n") }
                }
                return ExitStatus.success
            }),
        Command(
            name: "verify", abstract: "Check integrity and that the stored key opens the database; exit 1 on a problem.",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openExistingDatabase(invocation, context)
                defer { try? database.close() }
                let report = try checking { try database.verify() }
                try printVerification(report, invocation)
                return ExitStatus.success
            }),
        Command(
            name: "rotate-key", abstract: "Re-encrypt the database under a new key (crash-safe, verified).",
            discussion: """
                A new key is stored as pending, the database is exported under it into a new file, verified,
                renamed over the old one, and the key promoted. A crash at any step leaves a database that
                opens; the next open finishes or undoes the rotation. Backups and recovery codes made before
                need the old key afterwards.
                """,
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openExistingDatabase(invocation, context)
                defer { try? database.close() }
                let steps = KeyedDatabase.RotationStep.allCases.count
                try database.rotateKey { step in
                    Console.progress("rotating key (\(step))", done: step.rawValue, total: steps)
                }
                Console.err("rotated the key of database '\(database.name)'; make a new recovery code and new backups\n")
                return ExitStatus.success
            }),
        Command(
            name: "backup", abstract: "Write an encrypted copy (same key) to PATH and verify it.",
            arguments: [ArgumentSpec(name: "PATH", help: "Where to write the backup (must not exist).")],
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openExistingDatabase(invocation, context)
                defer { try? database.close() }
                let target = URL(fileURLWithPath: invocation.argument(0) ?? "")
                let report = try checking { try database.backup(to: target) }
                try printVerification(report, invocation)
                return ExitStatus.success
            }),
        Command(
            name: "import-plaintext", abstract: "Encrypt an existing plaintext SQLite database into the store.",
            arguments: [ArgumentSpec(name: "FILE", help: "The plaintext SQLite database (left unchanged).")],
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let source = URL(fileURLWithPath: invocation.argument(0) ?? "")
                guard FileManager.default.fileExists(atPath: source.path) else {
                    throw CLIError(status: ExitStatus.notFound, message: "there is no file \(UsageError.quoted(source.path)) to import")
                }
                Console.progress("importing", done: 0, total: 1)
                let database = try KeyedDatabase.importPlaintext(
                    from: source, paths: context.paths, name: databaseName(invocation), keychain: context.keychain)
                defer { try? database.close() }
                Console.progress("importing", done: 1, total: 1)
                Console.err("imported \(source.path) into encrypted database '\(database.name)' at \(database.url.path)\n")
                return ExitStatus.success
            }),
        Command(
            name: "recovery-code", abstract: "Print the key's recovery code (keep it offline; it IS the key).",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openExistingDatabase(invocation, context)
                defer { try? database.close() }
                let code = try database.recoveryCode()
                if Console.stdoutIsTerminal {
                    Console.err("This code is the database key. Write it down and keep it offline; anyone with it and the file can read the data.\n")
                }
                code.withUnsafeBytes { FileHandle.standardOutput.write(Data($0)) }
                Console.out("\n")
                return ExitStatus.success
            }),
        Command(
            name: "recover", abstract: "Restore a lost key from its recovery code (read from stdin or a prompt).",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let code = try readSecret(prompt: "Recovery code: ", raw: false)
                let database = try KeyedDatabase.recover(
                    paths: context.paths, name: databaseName(invocation), keychain: context.keychain, code: code)
                defer { try? database.close() }
                Console.err("the recovery code opens '\(database.url.path)'; its key is stored in the keyring again\n")
                return ExitStatus.success
            }),
    ])

/// Runs a check: a failed verification is exit status 1 (a check found a problem), as Docs/cli.md says.
private func checking<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as SecureStoreError where error.code == SecureStoreError.verificationFailed {
        throw CLIError(status: ExitStatus.checkFailed, message: error.message)
    }
}

private func printVerification(_ report: KeyedDatabaseVerification, _ invocation: Invocation) throws {
    if invocation.global.json {
        var object: [String: Any] = [
            "path": report.path, "size": report.size, "pageCount": report.pageCount, "pageSize": report.pageSize,
            "cipher": report.cipher, "hmac": report.hmac, "userVersion": report.userVersion,
            "tables": report.tableCount, "rows": report.rowCount, "key": report.key.rawValue, "integrity": "ok",
        ]
        if let version = report.sqlcipherVersion { object["sqlcipherVersion"] = version }
        object["encryption"] = report.encryption.jsonObject
        try Console.json(object)
    } else {
        Console.out(report.description + "\n")
    }
}
