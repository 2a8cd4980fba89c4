// `securestore sync watch`: sync by itself (Docs/sync.md, "Syncing by itself"; the library's SyncWatcher).
internal import Foundation
internal import SecureStore
internal import SecureStoreCore
internal import Sync

private let fetchIntervalOption = Option<Int>.wholeNumber(
    "fetch-interval", valueName: "SECONDS",
    help: "How often a git remote is asked whether it moved (default 60; a folder needs no asking).", minimum: 1, maximum: 86_400)
private let debounceOption = Option<Int>.wholeNumber(
    "debounce", valueName: "MILLISECONDS",
    help: "How long to wait after the last change before syncing (default 200): a burst of changes makes one sync.",
    minimum: 0, maximum: 60_000)

extension Option where Value == Duration {
    /// An option whose value is a duration: a whole number followed by s, m, h or d (seconds without one), from
    /// `minimum` seconds: `90`, `15m`, `7d`.
    static func duration(_ name: String, help: String, minimum: Int = 0) -> Self {
        Self(name, valueName: "DURATION", help: help, expected: "a duration of at least \(minimum) s (90, 90s, 15m, 2h, 7d)") { text in
            let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
            var digits = Substring(text), unit = 1
            if let last = text.last, let factor = units[last] {
                digits = text.dropLast()
                unit = factor
            }
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int(digits), number <= 3_650 * 86_400 / unit,
                number * unit >= minimum
            else { return nil }
            return .seconds(number * unit)
        }
    }
}

/// `--attachment-grace` of `sync clean` and `sync watch`.
let attachmentGraceOption = Option<Duration>.duration(
    "attachment-grace",
    help: "How long an attachment chunk no attachment needs stays on the remote before a cleanup removes it (default 7d).")
private let snapshotEveryOption = Option<Duration>.duration(
    "snapshot-every", help: "Write a snapshot this often, when something was synced since the last one (default: never).", minimum: 1)
private let cleanEveryOption = Option<Duration>.duration(
    "clean-every", help: "Run 'sync clean' this often, when something was synced since the last one (default: never).", minimum: 1)

/// One line of `sync watch --json`: what the watcher did (Docs/json/sync-watch.schema.json).
private struct SyncWatchJSON: Encodable {
    let event: String
    let time: String
    @Nullable var cause: String?
    let appliedBundles: Int
    let changedRows: Int
    let sentBundles: Int
    let sentRows: Int
    let newConflicts: Int
    @Nullable var message: String?
    @Nullable var retryInSeconds: Double?
    /// `cleaned`: files and bytes removed from the remote.
    @Nullable var removedFiles: Int?
    @Nullable var removedBytes: Int64?

    init(_ event: String, cause: String? = nil, report: SyncReport? = nil, message: String? = nil, retryIn: Duration? = nil) {
        self.event = event
        time = timestampText(Date())
        self.cause = cause
        appliedBundles = report?.appliedBundles ?? 0
        changedRows = report?.changedRows ?? 0
        sentBundles = report?.sentBundles ?? 0
        sentRows = report?.sentRows ?? 0
        newConflicts = report?.newConflicts ?? 0
        self.message = message
        retryInSeconds = retryIn.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }
}

private func seconds(_ duration: Duration) -> String {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
}

/// `securestore sync watch`.
let syncWatchCommand = Command(
    name: "watch", abstract: "Sync by itself: when a task changes here, and when other devices' changes arrive.",
    discussion: """
        Syncs at once, then whenever this device commits a change to the task list (in any process), whenever the
        sync folder receives another device's file, or — for git — whenever the remote moved (asked every
        --fetch-interval seconds). Costs nothing while nothing happens. A remote that cannot be reached is reported
        once and tried again after 2 s, 4 s, … up to 5 min; the watcher never stops by itself. SIGTERM, SIGINT (^C)
        or SIGHUP end it between two syncs, with status 0 (a second signal at once). Prints a line when a sync brought or sent something
        (--json: one line per event). Docs/sync.md, 'Syncing by itself'; the systemd user unit: 'securestore-sync-watch'.
        """,
    options: [fetchIntervalOption, debounceOption, snapshotEveryOption, cleanEveryOption, attachmentGraceOption, nameOption],
    run: { invocation in
        // Before anything else: a signal from now on ends the watcher between two syncs, never during one.
        let signals: FileDescriptor
        do {
            signals = try SignalPipe.install()
        } catch {
            throw CLIError(status: ExitStatus.software, message: "cannot handle signals: \(error)")
        }
        var options = SyncWatchOptions()
        if let interval = try invocation[fetchIntervalOption] { options.fetchInterval = .seconds(interval) }
        if let debounce = try invocation[debounceOption] { options.debounce = .milliseconds(debounce) }
        options.snapshotInterval = try invocation[snapshotEveryOption]
        options.cleanInterval = try invocation[cleanEveryOption]
        if let grace = try invocation[attachmentGraceOption] { options.attachmentGrace = grace }
        let json = invocation.global.json
        let context = try Context(invocation)
        let database = try openDatabase(invocation, context)
        defer { try? database.close() }
        // A SyncError becomes an exit status where every library error does (Console.swift's report).
        let engine = try syncEngine(database)
        let watcher = try SyncWatcher(engine: engine, options: options, reopen: { try SyncEngine(database: database) })
        let remote = escapedForTerminal(engine.remote.description)
        let isGit = if case .git = engine.remote { true } else { false }
        do {
            try watcher.run(signals: signals.rawValue) { event in
                switch event {
                case .started:
                    if json { try? Console.json(SyncWatchJSON("started", message: remote)) }
                    Console.err(
                        "watching database '\(database.name)' and \(remote)"
                            + (isGit ? " (asked every \(seconds(options.fetchInterval)) s)" : "")
                            + "; syncing when something changes (SIGTERM or ^C stops)\n")
                case .synced(let report, let cause):
                    if json { try? Console.json(SyncWatchJSON("synced", cause: cause.rawValue, report: report)) }
                    if !json && report.appliedBundles + report.sentBundles > 0 {
                        Console.err(
                            "\(timestampTextInSeconds(Date())) \(cause.rawValue): applied \(report.appliedBundles) bundle(s) "
                                + "(\(report.changedRows) row(s) changed), sent \(report.sentBundles) (\(report.sentRows) row(s))"
                                + (report.newConflicts > 0 ? "; \(report.newConflicts) value(s) to the conflict log" : "") + "\n")
                    }
                case .failed(let error, let cause, let retryIn):
                    if json {
                        try? Console.json(SyncWatchJSON("failed", cause: cause.rawValue, report: error.report, message: error.message, retryIn: retryIn))
                    }
                    Console.err(
                        "\(timestampTextInSeconds(Date())) sync failed: \(escapedForTerminal(error.message, limit: 1000)); "
                            + (retryIn.map { "trying again in \(seconds($0)) s and after longer waits (said once)" }
                                ?? "trying again at the next change") + "\n")
                case .recovered(let report, let failures):
                    if json { try? Console.json(SyncWatchJSON("recovered", report: report)) }
                    Console.err(
                        "\(timestampTextInSeconds(Date())) synced again after \(failures) failed attempt(s): applied "
                            + "\(report.appliedBundles) bundle(s), sent \(report.sentBundles)\n")
                case .snapshotted(let info):
                    if json { try? Console.json(SyncWatchJSON("snapshotted", cause: SyncWatchCause.schedule.rawValue, message: info.path)) }
                    if !json {
                        Console.err(
                            "\(timestampTextInSeconds(Date())) wrote the snapshot '\(escapedForTerminal(info.path))': \(info.rows) row(s) "
                                + "in \(info.files) file(s)\n")
                    }
                case .cleaned(let cleaned):
                    let files = cleaned.removedBundles + cleaned.removedSnapshots + cleaned.removedSeenFiles
                        + cleaned.removedOldGenerationFiles + cleaned.removedTemporaryFiles + cleaned.removedAttachmentFiles
                    if json {
                        var line = SyncWatchJSON("cleaned", cause: SyncWatchCause.schedule.rawValue, report: cleaned.sync)
                        line.removedFiles = files
                        line.removedBytes = cleaned.removedBytes
                        try? Console.json(line)
                    }
                    if !json && files > 0 {
                        Console.err(
                            "\(timestampTextInSeconds(Date())) cleaned: removed \(cleaned.removedBundles) bundle(s) and "
                                + "\(cleaned.removedAttachmentFiles) attachment file(s) among \(files) file(s) (\(cleaned.removedBytes) bytes)\n")
                    }
                case .stopped:
                    if json { try? Console.json(SyncWatchJSON("stopped")) }
                    Console.err("stopped\n")
                }
            }
        }
        return ExitStatus.success
    })
