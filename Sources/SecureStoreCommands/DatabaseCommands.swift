internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStore
internal import SecureStoreCore
internal import Sync
internal import Tasks

/// `--name NAME`: the database a `db` or `tasks` command works on.
let nameOption = Option<String>("name", valueName: "NAME", help: "The database (default: tasks).")

/// The database name of an invocation (`--name`, default `tasks`).
func databaseName(_ invocation: Invocation) throws -> String { try invocation[nameOption] ?? "tasks" }

/// Opens the keyed database of an invocation. Only commands that write create it (with its key); every
/// other command on a database that does not exist creates nothing — no file, no directory, no keyring
/// item — and exits 66 with a hint naming the command that creates it: a typo in --app, --name or
/// --data-dir must not make an empty database (and hand out a recovery code for it).
func openDatabase(_ invocation: Invocation, _ context: Context, create: Bool = false) throws -> KeyedDatabase {
    let name = try databaseName(invocation)
    do {
        let database = try KeyedDatabase(paths: context.paths, name: name, keychain: context.keychain, createIfMissing: create)
        if database.queue.isReadOnlyForLackOfSpace {
            // Said once, at the open: reading goes on, and a write fails with the same words (74).
            Console.err(
                "securestore: the disk holding '\(database.path)' is full: opened for reading only (SQLite cannot make "
                    + "its 32 KiB shared-memory index, -shm, beside it); writes need space: free some there\n")
        }
        return database
    } catch let error as SecureStoreError where error.code == SecureStoreError.Code.notFound && !create
        && !fileExists(context.paths.databaseURL(name: name).path, followingLinks: true)
    {
        throw CLIError(status: ExitStatus.notFound, message: error.message, hint: createHint(name))
    }
}

/// What creates the database `name`, for the hint of a command that does not.
func createHint(_ name: String) -> String {
    name == "tasks"
        ? "check --app and --data-dir; 'securestore tasks add TITLE' creates it"
        : "check --app, --name and --data-dir; 'securestore tasks add --name \(name) TITLE' or 'securestore db import-plaintext --name \(name) FILE' creates it"
}

private let backupPathArgument = Argument("PATH", help: "Where to write the backup (must not exist).", completion: .files)
private let plaintextArgument = Argument("FILE", help: "The plaintext SQLite database (left unchanged).", completion: .files)
private let backupArgument = Argument("BACKUP", help: "The backup file (made by 'securestore db backup').", completion: .files)

/// `securestore db …`: the encrypted database and its key.
let dbCommand = Command(
    name: "db", abstract: "Inspect, verify, back up and re-key the encrypted database.",
    subcommands: [
        Command(
            name: "info", abstract: "Path, size, cipher settings, SQLCipher version and where the key lives (never the key).",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let info = try KeyedDatabase.info(paths: context.paths, name: try databaseName(invocation), keychain: context.keychain)
                guard info.exists else {
                    throw CLIError(
                        status: ExitStatus.notFound, message: "there is no database '\(info.name)' at '\(info.path)'",
                        hint: createHint(info.name))
                }
                var encryption: CipherInfo?
                var attachments: [String] = []
                if info.hasKey {
                    let database = try openDatabase(invocation, context)
                    encryption = try database.queue.cipherInfo()
                    attachments = try attachmentInfoLines(database)
                    try database.close()
                }
                if invocation.global.json {
                    try Console.json(DatabaseInfoJSON(info, cipher: encryption))
                } else {
                    Console.out(info.description + "\n")
                    for line in (encryption?.lines ?? []) + attachments { Console.out(line + "\n") }
                }
                return ExitStatus.success
            }),
        Command(
            name: "verify", abstract: "Check integrity and that the stored key opens the database; exit 1 on a problem.",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let report = try checking { try database.verify() }
                try printVerification(report, invocation)
                try verifyAttachments(database, invocation)
                return ExitStatus.success
            }),
        Command(
            name: "rotate-key", abstract: "Re-encrypt the database under a new key (crash-safe, verified).",
            discussion: """
                A new key is stored as pending, the database is exported under it into a new file, verified,
                renamed over the old one, and the key promoted. A crash at any step leaves a database that
                opens; the next open finishes or undoes the rotation. The old key is kept as a retired key, so
                backups and recovery codes made before still open ('securestore db keys list').
                """,
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let steps = KeyedDatabase.RotationStep.allCases.count
                let retired = try database.rotateKey { step in
                    Console.progress("rotating key (\(step))", done: step.rawValue, total: steps)
                }
                if invocation.global.json {
                    try Console.json(
                        RotationJSON(
                            databaseId: database.databaseID, retiredAccount: retired.account,
                            retiredAt: timestampText(retired.date), alsoOpens: retired.alsoOpens))
                }
                Console.err("rotated the key of database '\(database.name)'; make a new recovery code and new backups\n")
                Console.err("the previous key is kept as the retired key '\(retired.account)': backups and recovery codes made before now need it; 'securestore db keys prune' deletes it when you say so\n")
                for path in retired.alsoOpens {
                    Console.err("the retired key is also the key of '\(path)', which keeps its own key item\n")
                }
                return ExitStatus.success
            }),
        Command(
            name: "backup", abstract: "Write an encrypted copy (same key) to PATH and verify it.",
            arguments: [backupPathArgument],
            options: [nameOption],
            run: { invocation in
                let target = URL(fileURLWithPath: try invocation[backupPathArgument])
                let context = try Context(invocation)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                try fetchAttachmentsBeforeBackup(database)
                // An online copy: other programs keep writing the database while it runs (Docs/database.md).
                let report = try checking {
                    try database.backup(to: target) { progress in
                        Console.progress("copying", done: progress.completedPageCount, total: progress.totalPageCount)
                    }
                }
                try printVerification(report, invocation)
                if !invocation.global.json {
                    Console.err("the backup opens with the current key of database '\(database.name)' (keyring account '\(report.keyAccount)') and with its recovery code ('securestore db recovery-code'); after a rotation that key is kept as a retired key\n")
                }
                return ExitStatus.success
            }),
        Command(
            name: "import-plaintext", abstract: "Encrypt an existing plaintext SQLite database into the store.",
            arguments: [plaintextArgument],
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let source = URL(fileURLWithPath: try invocation[plaintextArgument])
                guard fileExists(source.path, followingLinks: true) else {
                    throw CLIError(status: ExitStatus.notFound, message: "there is no file \(UsageError.quoted(source.path)) to import")
                }
                Console.progress("importing", done: 0, total: 1)
                let database = try KeyedDatabase.importPlaintext(
                    from: source, paths: context.paths, name: try databaseName(invocation), keychain: context.keychain)
                defer { try? database.close() }
                Console.progress("importing", done: 1, total: 1)
                if invocation.global.json {
                    try Console.json(
                        DatabaseStoredJSON(
                            name: database.name, path: database.url.path, databaseId: database.databaseID,
                            source: source.path))
                }
                Console.err("imported \(source.path) into encrypted database '\(database.name)' at \(database.url.path)\n")
                Console.err("the plaintext source \(source.path) still exists, unencrypted and unchanged: delete it once you have checked the import\n")
                return ExitStatus.success
            }),
        Command(
            name: "recovery-code", abstract: "Print the key's recovery code (keep it offline; it IS the key).",
            options: [nameOption],
            run: { invocation in
                let context = try Context(invocation)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let code = try database.recoveryCode()
                if Console.stdoutIsTerminal {
                    Console.err("This code is the database key. Write it down and keep it offline; anyone with it and the file can read the data.\n")
                }
                // The code is letters, digits and dashes: written into the JSON string as it is, never copied
                // into a String.
                if invocation.global.json { Console.out("{\"recoveryCode\":\"") }
                code.withUnsafeBytes { Console.write($0) }
                Console.out(invocation.global.json ? "\"}\n" : "\n")
                return ExitStatus.success
            }),
        Command(
            name: "recover", abstract: "Restore a lost key from its recovery code (read from stdin or a prompt).",
            discussion: """
                The code must open the database file. A different key stored for the same database is kept as a
                retired key, never deleted. A copy of a database that still exists elsewhere is refused: the code
                would otherwise take over that database's key.
                """,
            options: [nameOption],
            readsSecret: true,
            run: { invocation in
                let context = try Context(invocation)
                let code = try readSecret(prompt: "Recovery code: ", raw: false)
                let database = try KeyedDatabase.recover(
                    paths: context.paths, name: try databaseName(invocation), keychain: context.keychain, code: code)
                defer { try? database.close() }
                if invocation.global.json {
                    try Console.json(
                        DatabaseStoredJSON(name: database.name, path: database.url.path, databaseId: database.databaseID))
                }
                Console.err("the recovery code opens '\(database.url.path)'; its key is stored in \(context.keychain.configuration.store) again\n")
                return ExitStatus.success
            }),
        Command(
            name: "restore", abstract: "Install a backup as the database (the current one is kept aside).",
            discussion: """
                The backup is verified with its key: one in the keyring (current or retired), else the recovery
                code of the key it was made under, asked for without echo (or read from standard input). It is
                installed under a new key and database id, so it never takes over another database's key; the
                database that was there is kept as <name>.before-restore-<time>.db and opens with --name. The
                backup file is left unchanged.
                """,
            arguments: [backupArgument],
            options: [nameOption],
            readsSecret: true,
            run: { invocation in
                let context = try Context(invocation)
                let backup = URL(fileURLWithPath: try invocation[backupArgument])
                let steps = KeyedDatabase.RestoreStep.allCases.count
                func restore(_ code: Secret?) throws -> KeyedDatabaseRestoreReport {
                    try KeyedDatabase.restore(
                        from: backup, paths: context.paths, name: try databaseName(invocation), keychain: context.keychain,
                        code: code
                    ) { step in Console.progress("restoring (\(step))", done: step.rawValue, total: steps) }
                }
                let report: KeyedDatabaseRestoreReport
                do {
                    report = try checking { try restore(nil) }
                } catch let missing as SecureStoreError where missing.code == SecureStoreError.Code.missingKey {
                    // No stored key opens it (a lost keyring, or a pruned key): its recovery code may. Without
                    // one on standard input, the refusal is the answer.
                    let code: Secret
                    do {
                        code = try readSecret(prompt: "Recovery code of the backup's key: ", raw: false)
                    } catch {
                        throw missing
                    }
                    report = try checking { try restore(code) }
                }
                if invocation.global.json {
                    try Console.json(RestoreJSON(report))
                } else {
                    Console.out(report.description + "\n")
                }
                return ExitStatus.success
            }),
        deleteCommand,
        keysCommand,
    ])

/// `--delete-keys`: `db delete` deletes the keys too (KeyedDatabase.KeyDisposal.delete).
private let deleteKeysFlag = Flag(
    "delete-keys", help: "Delete its keys too (current and retired): its backups then open only with a recovery code.")

/// `securestore db delete`: the database, its attachments and its keys (KeyedDatabase.delete).
private let deleteCommand = Command(
    name: "delete", abstract: "Delete the database, its attachments and its key (kept as a retired key); asks first on a terminal.",
    discussion: """
        Removes the database file, its -wal and -shm, its attachments file and what interrupted rotations or restores
        left, then its key items. By default its key is kept as a retired key, so backups made of it still restore
        ('db keys prune' deletes it later); with --delete-keys every key of the database is deleted. Refused while
        the database is open anywhere. A deletion killed halfway is finished by the next command on the database.
        Databases kept aside by a restore, and the sync folder, are left alone; its sync key is deleted with
        --delete-keys and kept otherwise (a restored backup syncs again with it).
        """,
    options: [nameOption, deleteKeysFlag, yesFlag],
    run: { invocation in
        try requireYesOffTerminal(invocation, "deletes a database for good")
        let context = try Context(invocation)
        let name = try databaseName(invocation)
        let keys: KeyedDatabase.KeyDisposal = invocation[deleteKeysFlag] ? .delete : .retire
        let path = context.paths.databaseURL(name: name).path
        // Without a file there is nothing to ask about: either nothing to delete, or a deletion killed after its commit
        // point, which the library finishes.
        if fileExists(path, followingLinks: true) {
            try confirm(
                "delete the database '\(name)' at \(escapedForTerminal(path)) with its attachments, and "
                    + (keys == .delete
                        ? "delete its keys: backups made of it will open only with their recovery code"
                        : "keep its key as a retired key (its backups still restore)"),
                invocation)
        }
        let report: KeyedDatabaseDeletion
        do {
            report = try KeyedDatabase.delete(paths: context.paths, name: name, keychain: context.keychain, keys: keys)
        } catch let error as SecureStoreError where error.code == SecureStoreError.Code.notFound {
            throw CLIError(status: ExitStatus.notFound, message: error.message, hint: createHint(name))
        }
        // Its sync key (stored under its database id) goes with its other keys; kept with a retired key, it lets a
        // restored backup sync again (Docs/sync.md).
        let deletedSyncKey =
            try keys == .delete && context.keychain.delete(service: SyncEngine.keyService(context.paths), account: report.databaseID)
        // So does the private key of a join request it made and never used ('sync request', Docs/sync.md).
        if keys == .delete { _ = try context.keychain.delete(service: SyncEngine.joinKeyService(context.paths), account: report.databaseID) }
        if invocation.global.json {
            try Console.json(
                DeletedDatabaseJSON(
                    path: report.path, databaseId: report.databaseID, removedFiles: report.removedFiles,
                    retiredAccounts: report.retiredAccounts, deletedAccounts: report.deletedAccounts,
                    deletedSyncKey: deletedSyncKey))
        } else {
            Console.out(report.description + "\n")
            if deletedSyncKey { Console.out("deleted its sync key\n") }
        }
        return ExitStatus.success
    })

/// `db delete --json`.
private struct DeletedDatabaseJSON: Encodable {
    let path: String
    let databaseId: String
    let removedFiles: [String]
    let retiredAccounts: [String]
    let deletedAccounts: [String]
    /// Whether `--delete-keys` deleted the database's sync key too (false: it had none, or keys were retired).
    let deletedSyncKey: Bool
}

/// A date as key listings show it: `2026-11-23T16:15:02Z`.
private func keyDate(_ date: Date) -> String { timestampTextInSeconds(date) }

/// `--before DATE`: the tool's one date grammar (``parseDate(_:)``).
private let beforeOption = Option<Date>(
    "before", valueName: "DATE", help: "Retired before this date: 2026-11-23 (midnight UTC) or 2026-11-23T16:15:02Z. Required.",
    expected: dateGrammar, convert: parseDate)

/// `securestore db keys …`: the application's database key items.
private let keysCommand = Command(
    name: "keys", abstract: "List the database keys in the key store, and prune retired ones.",
    subcommands: [
        Command(
            name: "list", abstract: "Every database key item of the application (current, pending, retired, legacy); never a key.",
            run: { invocation in
                let context = try Context(invocation)
                let keys = try KeyedDatabase.keys(paths: context.paths, keychain: context.keychain)
                if invocation.global.json {
                    try Console.json(
                        keys.map { key in
                            DatabaseKeyJSON(
                                account: key.account, role: key.role.rawValue, databaseId: key.databaseID, path: key.path,
                                fileExists: key.path == nil ? nil : key.fileExists, retiredAt: key.retiredAt.map(timestampText))
                        })
                    return ExitStatus.success
                }
                for key in keys {
                    let id = key.databaseID.map { String($0.prefix(8)) } ?? "-"
                    let detail: String =
                        switch key.role {
                        case .current: (key.path ?? "") + (key.fileExists ? "" : " (no file there)")
                        case .pending: "rotation under way; the next open finishes or undoes it"
                        case .retired: "retired " + (key.retiredAt.map(keyDate) ?? "?") + "; opens older backups"
                        case .legacy: "written by securestore 0.1 for '\(key.account)'; kept, it may open a folder not yet opened"
                        }
                    Console.out("\(key.role.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0))  \(id)  \(detail)\n")
                }
                if keys.isEmpty, Console.stdoutIsTerminal { Console.err("(no database keys for this application)\n") }
                return ExitStatus.success
            }),
        Command(
            name: "prune",
            abstract: "Delete keys retired before DATE (backups made under them stop opening); asks first on a terminal.",
            options: [beforeOption, yesFlag],
            rules: [.required(beforeOption, message: "give --before DATE: retired keys are deleted only up to a date you choose")],
            run: { invocation in
                let date = try invocation.required(beforeOption)
                try requireYesOffTerminal(invocation, "deletes retired keys for good")
                let context = try Context(invocation)
                if !invocation[yesFlag] {
                    let doomed = try KeyedDatabase.keys(paths: context.paths, keychain: context.keychain).filter { key in
                        key.role == .retired && (key.retiredAt.map { $0 < date } ?? false)
                    }
                    for key in doomed {
                        Console.err("  \(escapedForTerminal(key.account))  retired \(key.retiredAt.map(keyDate) ?? "?")\n")
                    }
                    try confirm(
                        doomed.isEmpty ? nil : "delete the \(counted(doomed.count, "retired key")) above from the "
                            + "keyring; backups and recovery codes made under them will no longer open", invocation)
                }
                let deleted = try KeyedDatabase.pruneRetiredKeys(paths: context.paths, keychain: context.keychain, before: date)
                if invocation.global.json {
                    try Console.json(PrunedKeysJSON(deleted: deleted.count, accounts: deleted))
                } else {
                    for account in deleted { Console.out("deleted \(account)\n") }
                    Console.err("deleted \(deleted.count) retired key(s); backups made under them no longer open\n")
                }
                return ExitStatus.success
            }),
    ])

/// Runs a check: a failed verification is exit status 1 (a check found a problem), as Docs/cli.md says.
private func checking<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as SecureStoreError where error.code == SecureStoreError.Code.verificationFailed {
        throw CLIError(status: ExitStatus.checkFailed, message: error.message)
    }
}

private func printVerification(_ report: KeyedDatabaseVerification, _ invocation: Invocation) throws {
    if invocation.global.json {
        try Console.json(VerificationJSON(report))
    } else {
        Console.out(report.description + "\n")
    }
}
