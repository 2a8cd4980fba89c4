internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStore
internal import SecureStoreCore
internal import Sync
internal import Tasks

private let gitOption = Option<String>(
    "git", valueName: "URL", help: "Sync through this git remote (any URL git reaches; a bare repository).",
    expected: "a repository URL", convert: { url in url.isEmpty || url.hasPrefix("-") ? nil : url })
private let folderOption = Option<String>(
    "folder", valueName: "PATH", help: "Sync through this folder (one Syncthing, Nextcloud or rclone replicates).",
    completion: .directories)
/// `--attachments eager|lazy` of `sync init` and `sync join` (Docs/sync.md, "Attachments").
private let attachmentsOption = Option<SyncAttachmentMode>(
    "attachments", valueName: "WHEN",
    help: "When this device fetches the bytes of attachments added elsewhere: eager (at each sync, the default) or lazy (when first read).",
    completion: .words(["eager", "lazy"]), expected: "eager or lazy", convert: { SyncAttachmentMode(rawValue: $0) })
/// `sync join --approved-by`: the approving device's fingerprint, instead of a pairing code.
private let approvedByOption = Option<String>(
    "approved-by", valueName: "FINGERPRINT",
    help: "Join through the grant of the device with this fingerprint ('sync approve' printed it) instead of a pairing code.",
    expected: "a fingerprint", convert: { text in text.isEmpty || text.hasPrefix("-") ? nil : text })
/// `sync init` and `sync join` take exactly one remote.
private let remoteRule = ArgumentRule.exactlyOne([.option(gitOption), .option(folderOption)])

/// The remote of `sync init` / `sync join`: --git or --folder (exactly one: ``remoteRule``).
private func remote(_ invocation: Invocation, creatingFolder: Bool) throws -> SyncRemote {
    if let url = try invocation[gitOption] {
        // A repository on this machine (a USB disk, a test's bare repository) by its absolute path: later syncs run
        // from anywhere.
        if FileManager.default.fileExists(atPath: url) { return .git(URL(fileURLWithPath: url).standardizedFileURL.path) }
        return .git(url)
    }
    let absolute = URL(fileURLWithPath: try invocation.required(folderOption)).standardizedFileURL.path
    if creatingFolder { try? makeDirectories(absolute) }
    return .folder(absolute)
}

/// The task list's database, created when missing, with its task list (`sync init` and `sync join`).
private func openForSetup(_ invocation: Invocation) throws -> KeyedDatabase {
    let context = try Context(invocation)
    let database = try openDatabase(invocation, context, create: true)
    do {
        _ = try TaskList(database: database, createIfMissing: true)
    } catch {
        try? database.close()
        throw error
    }
    return database
}

/// Runs `body` with the sync engine of the invocation's database (its errors become exit statuses in `report`, as
/// every library error does: Console.swift).
private func withEngine(_ invocation: Invocation, _ body: (SyncEngine) throws -> Int32) throws -> Int32 {
    let context = try Context(invocation)
    let database = try openDatabase(invocation, context)
    defer { try? database.close() }
    return try body(try syncEngine(database))
}

/// The sync engine of `database`, saying once when the database was copied from another machine (`sync watch` too).
func syncEngine(_ database: KeyedDatabase) throws -> SyncEngine {
    let engine = try SyncEngine(database: database)
    if let original = engine.copiedFromDevice {
        Console.err(
            "this database was copied from another machine, where it syncs as device \(original.prefix(8)); here it is a new "
                + "device, \(engine.device.prefix(8)), so the two never write one chain of bundles\n")
    }
    return engine
}

/// `sync now`, `sync join`: what a round did.
private struct SyncReportJSON: Encodable {
    let appliedBundles: Int
    let changedRows: Int
    let newConflicts: Int
    let sentBundles: Int
    let sentRows: Int
    let pendingBundles: [String]
    let reappliedOwnBundles: Int
    let sentAttachments: Int
    let sentAttachmentChunks: Int
    let fetchedAttachments: Int
    let missingAttachments: Int
    @Nullable var snapshot: String?
    let snapshotBundles: Int
    let refusedSnapshots: [String]
    let prunedTombstones: Int
    let missingBundles: [String]
    let skippedFiles: [String]
    let resentBundles: Int

    init(_ report: SyncReport) {
        missingBundles = report.missingBundles
        skippedFiles = report.skippedFiles
        resentBundles = report.resentBundles
        sentAttachments = report.sentAttachments
        sentAttachmentChunks = report.sentAttachmentChunks
        fetchedAttachments = report.fetchedAttachments
        missingAttachments = report.missingAttachments
        appliedBundles = report.appliedBundles
        changedRows = report.changedRows
        newConflicts = report.newConflicts
        sentBundles = report.sentBundles
        sentRows = report.sentRows
        pendingBundles = report.pendingBundles
        reappliedOwnBundles = report.reappliedOwnBundles
        snapshot = report.snapshot
        snapshotBundles = report.snapshotBundles
        refusedSnapshots = report.refusedSnapshots
        prunedTombstones = report.prunedTombstones
    }
}

/// `sync snapshot`: what was written.
private struct SyncSnapshotJSON: Encodable {
    let snapshot: String
    let rows: Int
    let files: Int
    let bundlesCovered: Int64
}

/// `sync clean`: what the sync did, and what was removed from the remote.
private struct SyncCleanJSON: Encodable {
    let appliedBundles: Int
    let sentBundles: Int
    let removedBundles: Int
    let removedSnapshots: Int
    let removedSeenFiles: Int
    let removedOldGenerationFiles: Int
    let removedTemporaryFiles: Int
    let removedFilesOfRemovedDevices: Int
    let removedDevicesFilesWaitFor: [String]
    let removedAttachmentFiles: Int
    let removedAttachmentBytes: Int64
    let unreferencedAttachmentFiles: Int
    let attachmentsWaitingFor: [String]
    let removedBytes: Int64
    let cleanedThrough: Int64
    let keptBundles: Int
    @Nullable var snapshot: String?
    let waitingFor: [String]

    init(_ report: SyncCleanReport) {
        appliedBundles = report.sync.appliedBundles
        sentBundles = report.sync.sentBundles
        removedBundles = report.removedBundles
        removedSnapshots = report.removedSnapshots
        removedSeenFiles = report.removedSeenFiles
        removedOldGenerationFiles = report.removedOldGenerationFiles
        removedTemporaryFiles = report.removedTemporaryFiles
        removedFilesOfRemovedDevices = report.removedFilesOfRemovedDevices
        removedDevicesFilesWaitFor = report.removedDevicesFilesWaitFor
        removedAttachmentFiles = report.removedAttachmentFiles
        removedAttachmentBytes = report.removedAttachmentBytes
        unreferencedAttachmentFiles = report.unreferencedAttachmentFiles
        attachmentsWaitingFor = report.attachmentsWaitingFor
        removedBytes = report.removedBytes
        cleanedThrough = report.cleanedThrough
        keptBundles = report.keptBundles
        snapshot = report.snapshot
        waitingFor = report.waitingFor
    }
}

private struct SyncStatusJSON: Encodable {
    let device: String
    let remote: String
    let unsentRows: Int
    @Nullable var lastSync: String?
    let bundles: Int64
    let tables: [String]
    let conflicts: Int
    let attachments: String
}

private struct SyncDeviceJSON: Encodable {
    let id: String
    let name: String
    let bundles: Int64
    @Nullable var lastSeen: String?
    let thisDevice: Bool
}

private struct SyncConflictJSON: Encodable {
    let id: Int64
    let table: String
    let column: String
    let rowId: String
    let lostValue: String
    let lostDevice: String
    let lostAt: String
    let wonDevice: String
    let wonAt: String
}

/// A row key or value as text: a 16-byte blob as a UUID, text as it is, numbers in decimal.
private func text(_ value: DatabaseValue) -> String {
    switch value {
    case .null: return ""
    case .integer(let number): return String(number)
    case .real(let number): return String(number)
    case .text(let string): return string
    case .blob(let data):
        if data.count == 16 {
            let uuid = data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            return uuid.uuidString.lowercased()
        }
        return data.base64EncodedString()
    }
}

private func printReport(_ report: SyncReport, _ invocation: Invocation) throws {
    if invocation.global.json {
        try Console.json(SyncReportJSON(report))
    } else {
        Console.err(
            "applied \(report.appliedBundles) bundle(s) from other devices (\(report.changedRows) row(s) changed); "
                + "sent \(report.sentBundles) bundle(s) (\(report.sentRows) row(s))\n")
        if report.sentAttachments + report.fetchedAttachments + report.missingAttachments > 0 {
            Console.err(
                "attachments: sent the bytes of \(report.sentAttachments) (\(report.sentAttachmentChunks) new chunk(s)), fetched "
                    + "\(report.fetchedAttachments); \(report.missingAttachments) without their bytes on this device\n")
        }
    }
    if let snapshot = report.snapshot {
        Console.err(
            "started from the snapshot '\(escapedForTerminal(snapshot))' (it holds \(report.snapshotBundles) bundle(s), not applied one "
                + "by one); then applied the bundles after it\n")
    }
    for refusal in report.refusedSnapshots {
        Console.err(escapedForTerminal(refusal) + "; started from the bundles instead\n")
    }
    if !report.missingBundles.isEmpty {
        Console.err(
            "\(report.missingBundles.count) bundle(s) this device needs are not on the remote (removed after a snapshot held them, "
                + "or not delivered yet) and no snapshot holds them: \(report.missingBundles.map { escapedForTerminal($0) }.joined(separator: ", ")); "
                + "their device's later bundles wait. If a later sync does not bring them, run 'securestore sync snapshot' on a "
                + "device that is up to date\n")
    }
    if !report.skippedFiles.isEmpty {
        Console.err(
            "skipped \(report.skippedFiles.count) file(s) on the remote that are not what their names say (a symbolic link, folder, "
                + "FIFO or device in place of a file of ours, or a device folder whose bundles do not authenticate: planted by "
                + "someone who can write the remote); nothing of them was read or applied: "
                + report.skippedFiles.map { escapedForTerminal($0) }.joined(separator: ", ") + "\n")
    }
    if report.reappliedOwnBundles > 0 {
        Console.err(
            "re-applied \(report.reappliedOwnBundles) of this device's own bundle(s) that its database did not have (it was "
                + "restored from an older backup, or a sync was interrupted): what it had sent is back\n")
    }
    if report.newConflicts > 0 {
        Console.err("\(report.newConflicts) value(s) lost a concurrent edit and are kept in the conflict log: 'securestore sync conflicts'\n")
    }
    if !report.pendingBundles.isEmpty {
        Console.err(
            "\(report.pendingBundles.count) bundle(s) come from a newer version of SecureStore and are kept pending, not applied "
                + "and not lost, until this device is upgraded: \(report.pendingBundles.joined(separator: ", "))\n")
    }
}

/// Runs a sync round; when it ends with an error that carries the round's report (a refused, missing or rolled-back
/// bundle: the round did all it could first), the report is printed — `--json` on standard output too — before the
/// error is.
private func reportingRound(_ invocation: Invocation, _ round: () throws -> SyncReport) throws -> SyncReport {
    do {
        return try round()
    } catch let error as SyncError {
        if let report = error.report { try printReport(report, invocation) }
        throw error
    }
}

/// Prints a pairing code on standard output: the line, or `{"pairingCode":"…"` + `json` + `}`. The code is letters,
/// digits and dashes, written as it is from its wiped buffer, never copied into a String.
private func printPairingCode(_ code: Secret, _ invocation: Invocation, json: String = "") {
    if invocation.global.json { Console.out("{\"pairingCode\":\"") }
    code.withUnsafeBytes { Console.write($0) }
    Console.out(invocation.global.json ? "\"" + json + "}\n" : "\n")
}

/// `sync approve FINGERPRINT`.
private let fingerprintArgument = Argument("FINGERPRINT", help: "The fingerprint 'sync request' printed on the new device.")

/// `sync request`: the request's fingerprint and file.
private struct SyncRequestJSON: Encodable {
    let fingerprint: String
    let request: String
}

/// `sync approve`: the request approved, this device's fingerprint, the generation and the grant's file.
private struct SyncApprovalJSON: Encodable {
    let approved: String
    let approver: String
    let generation: Int
    let grant: String
}

private let deviceArgument = Argument("ID", help: "The device to remove (an id or a unique prefix).")
/// A conflict's number, from `sync conflicts`.
private let conflictArgument = Argument(
    "ID", help: "The number 'sync conflicts' shows.",
    value: ArgumentValue(
        convert: { text in Int64(text).flatMap { $0 > 0 ? $0 : nil } },
        refusing: { _ in "ID must be a conflict number from 'securestore sync conflicts'" }))

/// `securestore sync …`: end-to-end-encrypted sync of the task list (Docs/sync.md).
let syncCommand = Command(
    name: "sync", abstract: "Sync the task list between devices through git or a synced folder, end-to-end encrypted.",
    discussion: """
        Every device appends sealed bundles (AES-256-GCM under a random sync key kept in the key store) to its
        own folder of the remote; nothing readable leaves the machine. Changes merge per column, the latest edit
        winning; what a concurrent edit overwrote is kept in the conflict log ('sync conflicts'). Docs/sync.md.
        """,
    subcommands: [
        Command(
            name: "init", abstract: "Set up sync on this device (the first one) and print the pairing code.",
            discussion: """
                Makes a random sync key, stores it in the key store, records changes of the task list from now on,
                writes the remote's key check and sends the tasks already there. The pairing code printed IS the
                sync key: type it into 'sync join' on the next device and keep it nowhere else.
                """,
            options: [gitOption, folderOption, attachmentsOption, nameOption],
            rules: [remoteRule],
            run: { invocation in
                let remote = try remote(invocation, creatingFolder: true)
                let mode = try invocation[attachmentsOption] ?? .eager
                let database = try openForSetup(invocation)
                defer { try? database.close() }
                let (engine, code) = try SyncEngine.initialize(database: database, remote: remote, tables: ["tasks"])
                try engine.setAttachmentMode(mode)
                let report = try engine.sync()
                printPairingCode(code, invocation)
                Console.err(
                    "sync is set up for database '\(database.name)' through \(remote); this device is \(engine.device.prefix(8)); "
                        + "sent \(report.sentRows) task(s)\n")
                Console.err(
                    "on the next device run 'securestore sync join \(remote.option) …' and type this pairing code; it is the sync key: keep it nowhere else\n")
                return ExitStatus.success
            }),
        Command(
            name: "join", abstract: "Join a sync group with the pairing code of another device (read from standard input).",
            discussion: """
                The code is read without echo on a terminal, or from standard input. It is checked against the remote
                before anything is stored. Tasks already on this device are kept and sent; the group's tasks arrive.
                """,
            options: [gitOption, folderOption, attachmentsOption, approvedByOption, nameOption],
            rules: [remoteRule],
            readsSecret: true,
            run: { invocation in
                let remote = try remote(invocation, creatingFolder: false)
                let mode = try invocation[attachmentsOption] ?? .eager
                // Joining by approval (Docs/sync.md, "Joining by approval") reads no pairing code.
                let approver = try invocation[approvedByOption]
                let code = approver == nil ? try readSecret(prompt: "Pairing code: ", raw: false) : nil
                let database = try openForSetup(invocation)
                defer { try? database.close() }
                let engine: SyncEngine
                if let code {
                    engine = try SyncEngine.join(database: database, remote: remote, tables: ["tasks"], pairingCode: code)
                } else {
                    engine = try SyncEngine.join(database: database, remote: remote, tables: ["tasks"], approvedBy: approver ?? "")
                }
                try engine.setAttachmentMode(mode)
                Console.err("joined the sync group at \(remote) as device \(engine.device.prefix(8))\n")
                let report = try reportingRound(invocation) { try engine.sync() }
                try printReport(report, invocation)
                return ExitStatus.success
            }),
        Command(
            name: "request", abstract: "Ask to join a sync group without its pairing code: print this device's request fingerprint.",
            discussion: """
                Makes an X25519 key pair (the private key stays in the key store), writes its public key to the
                remote's 'requests' folder and prints its fingerprint. On a device of the group, 'sync approve' with
                that fingerprint prints the approving device's fingerprint; then 'sync join --approved-by' with it
                here. Nothing else changes until then; run again, it writes the same request. Docs/sync.md,
                'Joining by approval'.
                """,
            options: [gitOption, folderOption, nameOption],
            rules: [remoteRule],
            run: { invocation in
                let remote = try remote(invocation, creatingFolder: false)
                let database = try openForSetup(invocation)
                defer { try? database.close() }
                let request = try SyncEngine.requestToJoin(database: database, remote: remote)
                if invocation.global.json {
                    try Console.json(SyncRequestJSON(fingerprint: request.fingerprint, request: request.path))
                } else {
                    Console.out(request.fingerprint + "\n")
                }
                Console.err(
                    "asked to join the sync group at \(remote); on a device of the group run 'securestore sync approve "
                        + "\(request.fingerprint)' (check the fingerprint with your own eyes), then here 'securestore sync join "
                        + "\(remote.option) … --approved-by' with the fingerprint it prints\n")
                return ExitStatus.success
            }),
        Command(
            name: "approve", abstract: "Let a device join: seal the sync key to the request with this fingerprint.",
            discussion: """
                FINGERPRINT is what 'sync request' printed on the new device: compare it there with your own eyes. The
                group's current sync key is sealed to that request's public key and signed by this device; the
                fingerprint printed is this device's, which the new device's 'sync join --approved-by' takes.
                Docs/sync.md, 'Joining by approval'.
                """,
            arguments: [fingerprintArgument],
            options: [nameOption],
            run: { invocation in
                let fingerprint = try invocation[fingerprintArgument]
                return try withEngine(invocation) { engine in
                    let approval = try engine.approve(fingerprint)
                    if invocation.global.json {
                        try Console.json(
                            SyncApprovalJSON(
                                approved: approval.requester, approver: approval.approver, generation: approval.generation,
                                grant: approval.grant))
                    } else {
                        Console.out(approval.approver + "\n")
                    }
                    Console.err(
                        "approved the request \(approval.requester): the sync key is sealed to it in '\(approval.grant)'. On the new "
                            + "device run 'securestore sync join … --approved-by \(approval.approver)'\n")
                    return ExitStatus.success
                }
            }),
        Command(
            name: "now", abstract: "Sync: bring in other devices' changes and send this device's.",
            discussion: """
                With --attachments, this device's choice of when to fetch attachments' bytes is changed (and kept)
                first: 'sync now --attachments eager' fetches every attachment not here yet, e.g. before a backup.
                """,
            options: [attachmentsOption, nameOption],
            run: { invocation in
                try withEngine(invocation) { engine in
                    if let mode = try invocation[attachmentsOption] { try engine.setAttachmentMode(mode) }
                    try printReport(try reportingRound(invocation) { try engine.sync() }, invocation)
                    return ExitStatus.success
                }
            }),
        Command(
            name: "snapshot", abstract: "Sync, then write a snapshot that new devices start from instead of every bundle.",
            discussion: """
                Writes a sealed copy of every synced row with its clocks, and the bundles it holds, into this device's
                folder of the remote (replacing this device's older snapshot). A device that joins later applies the
                newest snapshot that verifies and then only the bundles after it. Docs/sync.md, 'Snapshots'.
                """,
            options: [nameOption],
            run: { invocation in
                try withEngine(invocation) { engine in
                    let info = try engine.writeSnapshot()
                    if invocation.global.json {
                        try Console.json(
                            SyncSnapshotJSON(snapshot: info.path, rows: info.rows, files: info.files, bundlesCovered: info.bundlesCovered))
                    } else {
                        Console.err(
                            "wrote the snapshot '\(escapedForTerminal(info.path))': \(info.rows) row(s) in \(info.files) file(s); a new "
                                + "device starts from it instead of \(info.bundlesCovered) bundle(s)\n")
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "clean", abstract: "Sync, then remove this device's old bundles that a snapshot holds and every device has applied.",
            discussion: """
                Removes from the remote only files this device wrote: its bundles that a snapshot (this device's or
                another's) holds and that every known device has applied, by the seen vector it published — never its
                newest bundle — its superseded snapshots and seen vectors, and its files in older key generations
                (and a removed device's there, once every device that stays has re-keyed).
                In git a commit deletes them (the history keeps them, sealed). A device that still needs them,
                restored from an older backup, starts from the snapshot. Run 'sync snapshot' first. Also removes this
                device's attachment chunks that no attachment needs, once unneeded for --attachment-grace (7d) and every
                device has synced since. Docs/sync.md, 'Cleaning the remote'.
                """,
            options: [attachmentGraceOption, nameOption],
            run: { invocation in
                let grace = try invocation[attachmentGraceOption] ?? SyncEngine.defaultAttachmentGrace
                return try withEngine(invocation) { engine in
                    let cleaned = try engine.clean(attachmentGrace: grace)
                    if invocation.global.json {
                        try Console.json(SyncCleanJSON(cleaned))
                    } else {
                        Console.err(
                            "applied \(cleaned.sync.appliedBundles) bundle(s) from other devices; sent \(cleaned.sync.sentBundles); removed "
                                + "\(cleaned.removedBundles) of this device's bundle(s), \(cleaned.removedSnapshots) old snapshot(s) and "
                                + "\(cleaned.removedSeenFiles) old seen file(s)"
                                + (cleaned.removedOldGenerationFiles > 0 ? ", and \(cleaned.removedOldGenerationFiles) file(s) of older key generations," : "")
                                + (cleaned.removedTemporaryFiles > 0 ? ", and \(cleaned.removedTemporaryFiles) temporary file(s) of killed syncs," : "")
                                + (cleaned.removedFilesOfRemovedDevices > 0
                                    ? ", and \(cleaned.removedFilesOfRemovedDevices) file(s) of removed devices in older key generations," : "")
                                + (cleaned.removedAttachmentFiles > 0 ? ", and \(cleaned.removedAttachmentFiles) attachment file(s) no attachment needs," : "")
                                + " from the remote (\(cleaned.removedBytes) bytes); "
                                + "\(cleaned.keptBundles) bundle(s) of this device kept\n")
                        if cleaned.snapshot == nil {
                            Console.err("no snapshot on the remote holds this device's bundles: run 'securestore sync snapshot' first\n")
                        } else if !cleaned.waitingFor.isEmpty {
                            Console.err(
                                "waiting for \(cleaned.waitingFor.map { String($0.prefix(8)) }.joined(separator: ", ")) to sync: "
                                    + "they have not applied all the bundles the snapshot holds\n")
                        }
                        if cleaned.unreferencedAttachmentFiles > 0 {
                            Console.err(
                                "\(cleaned.unreferencedAttachmentFiles) attachment file(s) no attachment needs kept for now: "
                                    + (cleaned.attachmentsWaitingFor.isEmpty
                                        ? "within the grace period (--attachment-grace), or this device is not caught up"
                                        : "waiting for \(cleaned.attachmentsWaitingFor.map { String($0.prefix(8)) }.joined(separator: ", ")) to sync")
                                    + "\n")
                        }
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "status", abstract: "This device, the remote, unsent changes and the last sync.",
            options: [nameOption],
            run: { invocation in
                try withEngine(invocation) { engine in
                    let status = try engine.status()
                    if invocation.global.json {
                        try Console.json(
                            SyncStatusJSON(
                                device: status.device, remote: status.remote.description, unsentRows: status.unsentRows,
                                lastSync: status.lastSync.map(timestampText), bundles: status.sequence,
                                tables: status.tables, conflicts: status.conflicts,
                                attachments: try engine.attachmentMode().rawValue))
                    } else {
                        Console.out("device: \(status.device)\nremote: \(escapedForTerminal(status.remote.description))\n")
                        Console.out("unsent changes: \(status.unsentRows) row(s)\n")
                        Console.out("last sync: \(status.lastSync.map(timestampText) ?? "never")\n")
                        Console.out("bundles sent: \(status.sequence)\nconflicts kept: \(status.conflicts)\n")
                        Console.out("attachments: \(try engine.attachmentMode().rawValue)\n")
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "devices", abstract: "The devices whose changes reached this one.",
            options: [nameOption],
            run: { invocation in
                try withEngine(invocation) { engine in
                    let devices = try engine.devices()
                    if invocation.global.json {
                        try Console.json(
                            devices.map {
                                SyncDeviceJSON(
                                    id: $0.id, name: $0.name, bundles: $0.sequence, lastSeen: $0.appliedAt.map(timestampText),
                                    thisDevice: $0.isThisDevice)
                            })
                    } else {
                        for device in devices {
                            let seen = device.appliedAt.map(timestampText) ?? "never"
                            Console.out(
                                "\(device.id.prefix(8))  \(escapedForTerminal(device.name))  \(device.sequence) bundle(s)  \(seen)\(device.isThisDevice ? "  (this device)" : "")\n")
                        }
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "conflicts", abstract: "Values that lost a concurrent edit (kept encrypted in the database).",
            options: [nameOption],
            run: { invocation in
                try withEngine(invocation) { engine in
                    let conflicts = try engine.conflicts()
                    if invocation.global.json {
                        try Console.json(
                            conflicts.map {
                                SyncConflictJSON(
                                    id: $0.id, table: $0.table, column: $0.column, rowId: text($0.key), lostValue: text($0.lostValue),
                                    lostDevice: $0.lostDevice, lostAt: timestampText($0.lostAt), wonDevice: $0.wonDevice,
                                    wonAt: timestampText($0.wonAt))
                            })
                    } else {
                        for conflict in conflicts {
                            Console.out(
                                "\(conflict.id)  \(conflict.table) \(text(conflict.key).prefix(8)) \(conflict.column): "
                                    + "\(escapedForTerminal(text(conflict.lostValue), limit: 200)) (device \(conflict.lostDevice.prefix(8)), "
                                    + "\(timestampText(conflict.lostAt))) lost to device \(conflict.wonDevice.prefix(8)) (\(timestampText(conflict.wonAt)))\n")
                        }
                        if conflicts.isEmpty { Console.err("no conflicts\n") }
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "remove-device", abstract: "Remove a device: replace the sync key and print the new pairing code.",
            discussion: """
                A new random sync key starts a new generation on the remote, to which this device sends everything it
                knows. Every device that stays runs 'sync rekey' with the new pairing code; the removed device keeps what
                it already had and can read nothing that comes after. ID is a device id or a unique prefix ('sync devices').
                """,
            arguments: [deviceArgument],
            options: [nameOption],
            run: { invocation in
                let id = try invocation[deviceArgument]
                let context = try Context(invocation)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let (removed, code) = try SyncEngine.removeDevice(id, database: database)
                printPairingCode(code, invocation, json: ",\"removedDevice\":\"\(removed)\"")
                Console.err(
                    "removed device \(removed.prefix(8)): the sync key is replaced; it keeps what it already had and reads nothing "
                        + "that comes after. On every device that stays, run 'securestore sync rekey' and type this pairing code\n")
                return ExitStatus.success
            }),
        Command(
            name: "rekey", abstract: "Take the new sync key after a device was removed (pairing code on standard input).",
            options: [nameOption],
            readsSecret: true,
            run: { invocation in
                let code = try readSecret(prompt: "New pairing code: ", raw: false)
                let context = try Context(invocation)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let report = try SyncEngine.rekey(database: database, pairingCode: code)
                try printReport(report, invocation)
                return ExitStatus.success
            }),
        Command(
            name: "restore-conflict", abstract: "Put a conflict's losing value back (it syncs as a new edit).",
            arguments: [conflictArgument],
            options: [nameOption],
            run: { invocation in
                let id = try invocation[conflictArgument]
                return try withEngine(invocation) { engine in
                    try engine.restoreConflict(id)
                    if invocation.global.json { try Console.json(["restored": 1]) }
                    Console.err("restored conflict \(id); it goes to the other devices with the next sync\n")
                    return ExitStatus.success
                }
            }),
        syncWatchCommand,  // SyncWatchCommand.swift
    ])
