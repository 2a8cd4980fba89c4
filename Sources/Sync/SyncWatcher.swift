// Sync that runs by itself (`securestore sync watch`, Docs/sync.md "Syncing by itself"): a sync when this device
// commits a change to a synced table, when the replicated folder receives a file of another device, or when the git
// remote moved; quiet (no wake-up at all for a folder) while nothing happens.
internal import EncryptedDatabase
internal import Foundation
public import SecureStore
internal import SecureStoreCore

/// How a ``SyncWatcher`` waits and retries.
public struct SyncWatchOptions: Sendable, Equatable {
    /// How long the watcher waits after the last change it noticed before it syncs (a burst of edits, or of files a
    /// replication engine delivers, makes one sync). A stream of changes never delays a sync more than
    /// ``longestDebounce``. 200 ms.
    public var debounce: Duration = .milliseconds(200)
    /// The most a stream of changes delays a sync: 2 s.
    public var longestDebounce: Duration = .seconds(2)
    /// How often a git remote is asked whether it moved (`git ls-remote`: one small request, nothing downloaded
    /// when nothing is new). 60 s. Not used for a folder, whose changes the kernel reports.
    public var fetchInterval: Duration = .seconds(60)
    /// The first wait after a sync failed (the remote could not be reached), doubled after each failure up to
    /// ``longestBackoff``. 2 s.
    public var firstBackoff: Duration = .seconds(2)
    /// The longest wait between two attempts while the remote cannot be reached: 5 min.
    public var longestBackoff: Duration = .seconds(300)
    /// How often the watcher writes a snapshot (``SyncEngine/writeSnapshot()``), when this device synced something
    /// since its last one; nil (the default): never — which device pays a snapshot's full scan is the person's choice.
    public var snapshotInterval: Duration?
    /// How often the watcher cleans the remote (``SyncEngine/clean(attachmentGrace:)``), when something was synced
    /// since its last cleanup or that cleanup left something waiting; nil (the default): never.
    public var cleanInterval: Duration?
    /// The grace period of the watcher's cleanups for attachment files: ``SyncEngine/defaultAttachmentGrace``.
    public var attachmentGrace: Duration = SyncEngine.defaultAttachmentGrace

    /// The defaults.
    public init() {}
}

/// Why a ``SyncWatcher`` synced.
public enum SyncWatchCause: String, Sendable, Equatable {
    /// The watcher started (what changed while it did not run goes out and comes in).
    case start
    /// This device committed a change to a synced table (in any process).
    case localChange = "local change"
    /// The replicated folder received a file of another device, or the git remote moved.
    case remoteChange = "remote change"
    /// An earlier sync failed and this is the next attempt.
    case retry
    /// A scheduled snapshot or cleanup (``SyncWatchOptions/snapshotInterval``, ``SyncWatchOptions/cleanInterval``).
    case schedule
}

/// What a ``SyncWatcher`` did: handed to the function given to ``SyncWatcher/run(_:)``, in order.
public enum SyncWatchEvent: Sendable {
    /// The watcher is waiting for changes of these files and folders.
    case started(watching: [String])
    /// A sync ran (``SyncReport/appliedBundles`` and ``SyncReport/sentBundles`` are 0 when there was nothing to do).
    case synced(SyncReport, cause: SyncWatchCause)
    /// A sync failed. Reported once for a run of failures with the same message; `retryIn` is when the next attempt
    /// is made by itself (nil: at the next change). The watcher goes on.
    case failed(SyncError, cause: SyncWatchCause, retryIn: Duration?)
    /// A sync succeeded after `failures` failed ones.
    case recovered(SyncReport, failures: Int)
    /// A scheduled snapshot was written (``SyncWatchOptions/snapshotInterval``).
    case snapshotted(SyncSnapshotInfo)
    /// A scheduled cleanup ran (``SyncWatchOptions/cleanInterval``).
    case cleaned(SyncCleanReport)
    /// The watcher stopped (``SyncWatcher/stop()`` or a signal), between two syncs.
    case stopped
}

/// Runs ``SyncEngine/sync()`` by itself: when this device commits a change to a synced table (in this process or any
/// other: the database's `-wal` and file are watched with inotify, and a sync runs only when the device's clock moved,
/// so its own syncs and changes to tables that do not sync start nothing), when the replicated folder receives a file
/// (inotify on the folder and its subfolders, other devices' files only: temporary and hidden names, and this device's
/// own folders, are ignored), or when a git remote moved (asked every ``SyncWatchOptions/fetchInterval``). Changes
/// close together make one sync (``SyncWatchOptions/debounce``). A remote that cannot be reached is reported once
/// and tried again with a growing wait; the watcher never ends by itself.
///
/// ```swift
/// let watcher = try SyncWatcher(database: database)
/// // On another thread, later: watcher.stop()
/// try watcher.run { event in print(event) }
/// ```
public final class SyncWatcher: Sendable {
    /// How it waits and retries.
    public let options: SyncWatchOptions
    let firstEngine: SyncEngine
    let reopen: (@Sendable () throws -> SyncEngine)?
    let stopReader: FileDescriptor
    let stopWriter: FileDescriptor

    /// A watcher of `engine`'s database and remote. `reopen` makes the engine again after a failure a new engine
    /// may not have (the sync key replaced by `sync rekey` in another process).
    public init(engine: SyncEngine, options: SyncWatchOptions = SyncWatchOptions(), reopen: (@Sendable () throws -> SyncEngine)? = nil) throws {
        self.firstEngine = engine
        self.options = options
        self.reopen = reopen
        do {
            (stopReader, stopWriter) = try FileDescriptor.pipe()
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot make the watcher's pipe: \(error)")
        }
    }

    /// A watcher of the sync set up on `database`.
    ///
    /// - Throws: what ``SyncEngine/init(database:)`` throws.
    public convenience init(database: KeyedDatabase, options: SyncWatchOptions = SyncWatchOptions()) throws {
        try self.init(engine: try SyncEngine(database: database), options: options, reopen: { try SyncEngine(database: database) })
    }

    deinit {
        stopReader.close()
        stopWriter.close()
    }

    /// Makes ``run(_:)`` return after the sync in progress, if any (from any thread, or a signal handler's thread).
    public func stop() {
        try? stopWriter.writeAll([1])
    }

    /// Syncs once, then every time something changes, until ``stop()``; hands what it does to `report` (on the
    /// calling thread). Returns only after ``stop()``: a failed sync is reported and retried, never thrown.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/remote`` when the kernel refuses to watch the database's folder.
    public func run(_ report: (SyncWatchEvent) -> Void) throws {
        try run(signals: nil, report)
    }

    /// ``run(_:)`` that also stops when a byte arrives on the descriptor `signals` (SecureStoreCore's `SignalPipe`).
    package func run(signals: Int32?, _ report: (SyncWatchEvent) -> Void) throws {
        try withoutActuallyEscaping(report) { report in
            let loop = try SyncWatchLoop(watcher: self, report: report)
            try loop.run(signals: signals.map { FileDescriptor(rawValue: $0) })
        }
    }
}

/// The state of one ``SyncWatcher/run(_:)``: the inotify watches, what is pending, the failures.
private final class SyncWatchLoop {
    let watcher: SyncWatcher
    var options: SyncWatchOptions { watcher.options }
    let report: (SyncWatchEvent) -> Void
    var engine: SyncEngine
    let watch: FileWatch
    let clock = ContinuousClock()

    /// The database's folder, and the names in it whose change may be a commit.
    let databaseFolder: String
    let databaseNames: Set<String>
    var databaseWatch: Int32 = -1
    /// The folder remote's watched folders, by watch number (relative paths, "" for the root).
    var folderWatches: [Int32: String] = [:]

    /// The device's clock after this watcher's last sync: a commit to a synced table moves it.
    var clockAfterSync: Int64?
    /// Writes to the database's files: a sync when they moved the clock and left rows to send. Their own timer: a
    /// process reading the database in a loop never delays a sync the folder asked for.
    var local = Debounce()
    /// A commit came while the last sync ran: sync again (once).
    var syncAgain = false
    /// Another device's files arrived, or a rescan is needed.
    var remote = Debounce()
    var nextFetch: ContinuousClock.Instant?
    var failures = 0
    var lastFailure: String?
    var retryAt: ContinuousClock.Instant?
    /// When the next scheduled snapshot and cleanup are due (nil: not scheduled).
    var nextSnapshot: ContinuousClock.Instant?
    var nextClean: ContinuousClock.Instant?
    /// A sync applied or sent something since the last snapshot, or since the last cleanup (or that cleanup left
    /// something waiting): only then is the next one worth its cost.
    var changedSinceSnapshot = true
    var changedSinceClean = true

    init(watcher: SyncWatcher, report: @escaping (SyncWatchEvent) -> Void) throws {
        self.watcher = watcher
        self.report = report
        self.engine = watcher.firstEngine
        do {
            watch = try FileWatch()
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot watch files (inotify): \(error)")
        }
        let path = engine.database.path
        databaseFolder = directoryPart(path)
        databaseNames = [namePart(path), namePart(path) + "-wal"]
    }

    var folderRoot: String? {
        if case .folder = engine.remote { return engine.transport.root }
        return nil
    }

    func run(signals: FileDescriptor?) throws {
        do {
            // Writes only: every process that had the database open closes it opened for writing (IN_CLOSE_WRITE).
            databaseWatch = try watch.add(databaseFolder, [.modified, .movedIn, .created])
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot watch the database's folder '\(databaseFolder)': \(error)")
        }
        watchFolder()
        report(.started(watching: [databaseFolder] + (folderRoot.map { [$0] } ?? [])))
        syncNow(.start)
        if case .git = engine.remote { nextFetch = clock.now + options.fetchInterval }
        nextSnapshot = options.snapshotInterval.map { clock.now + $0 }
        nextClean = options.cleanInterval.map { clock.now + $0 }
        var descriptors = [watch.descriptor, watcher.stopReader.rawValue]
        if let signals { descriptors.append(signals.rawValue) }
        while true {
            let deadline = [local.due, remote.due, retryAt, nextFetch, nextSnapshot, nextClean].compactMap { $0 }.min()
            let ready = waitForInput(descriptors, timeout: deadline.map { clock.now.duration(to: $0) }.map { max($0, .zero) })
            if ready[1] || (ready.count > 2 && ready[2]) {
                report(.stopped)
                return
            }
            if ready[0] { take(watch.read()) }
            let now = clock.now
            let remoteDue = remote.isDue(now), localDue = local.isDue(now)
            if remoteDue || localDue {
                let forced = syncAgain
                if remoteDue { remote = Debounce() }
                if localDue { local = Debounce() }
                syncAgain = false
                // While a failed sync waits for its retry, changes wait with it (the retry takes them).
                if retryAt == nil && (remoteDue || forced || (localClock() != clockAfterSync && hasUnsentChanges())) {
                    local = Debounce()
                    syncNow(remoteDue ? .remoteChange : .localChange, again: forced && !remoteDue)
                }
            }
            if let due = retryAt, due <= clock.now {
                retryAt = nil
                syncNow(.retry)
            }
            if let due = nextFetch, due <= clock.now {
                nextFetch = clock.now + options.fetchInterval
                if retryAt == nil {
                    do {
                        if try engine.gitRemoteMoved() { syncNow(.remoteChange) }
                    } catch let error as SyncError {
                        failed(error, .remoteChange)
                    } catch {
                        failed(SyncError(SyncError.Code.remote, "\(error)"), .remoteChange)
                    }
                    nextFetch = clock.now + options.fetchInterval
                }
            }
            scheduled()
        }
    }

    /// The scheduled snapshot and cleanup, when due (not while a failed sync waits for its retry: the remote is not
    /// there). Each is skipped, at no cost, when nothing was synced since the last one.
    func scheduled() {
        if let due = nextSnapshot, due <= clock.now, let interval = options.snapshotInterval {
            nextSnapshot = clock.now + interval
            if retryAt == nil && changedSinceSnapshot {
                do {
                    let info = try engine.writeSnapshot()
                    changedSinceSnapshot = false
                    changedSinceClean = true  // a new snapshot may let the cleanup remove more
                    clockAfterSync = localClock()
                    report(.snapshotted(info))
                } catch let error as SyncError {
                    failed(error, .schedule)
                } catch {
                    failed(SyncError(SyncError.Code.remote, "\(error)"), .schedule)
                }
            }
        }
        if let due = nextClean, due <= clock.now, let interval = options.cleanInterval {
            nextClean = clock.now + interval
            if retryAt == nil && changedSinceClean {
                do {
                    let cleaned = try engine.clean(attachmentGrace: options.attachmentGrace)
                    clockAfterSync = localClock()
                    // Something left waiting (a device that has not synced, a grace period) is looked at again next time.
                    changedSinceClean = !cleaned.waitingFor.isEmpty || cleaned.unreferencedAttachmentFiles > 0
                        || !cleaned.removedDevicesFilesWaitFor.isEmpty
                    if cleaned.sync.appliedBundles + cleaned.sync.sentBundles > 0 { changedSinceSnapshot = true }
                    report(.cleaned(cleaned))
                } catch let error as SyncError {
                    failed(error, .schedule)
                } catch {
                    failed(SyncError(SyncError.Code.remote, "\(error)"), .schedule)
                }
            }
        }
    }

    /// Notes what the kernel reported; schedules a sync after the debounce.
    func take(_ events: [FileWatch.Event]) {
        let now = clock.now
        for event in events {
            if event.events.contains(.overflow) {
                // Events were dropped: look at everything again.
                local.note(now, options)
                if folderRoot != nil { remote.note(now, options) }
                watchFolder()
                continue
            }
            if event.watch == databaseWatch {
                if databaseNames.contains(event.name) { local.note(now, options) }
                continue
            }
            guard let relative = folderWatches[event.watch] else { continue }
            if event.events.contains(.removed) {
                folderWatches[event.watch] = nil
                continue
            }
            guard isOthersFile(event.name) else { continue }
            if event.events.contains(.isDirectory) {
                // A new folder (a device's first bundle, a snapshot): watch it and what is in it already.
                watchFolder(relative.isEmpty ? event.name : relative + "/" + event.name)
            }
            remote.note(now, options)
        }
    }

    /// Whether a name in the folder remote is another device's file: not a temporary or hidden name (Syncthing's
    /// `.syncthing.*.tmp`, our `.*.tmp-*`, `.stfolder`, Nextcloud's `.~*`), not a partial or a conflict copy, and not
    /// this device's own folder.
    func isOthersFile(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && !name.hasPrefix("~") && !name.hasSuffix(".part") && !name.hasSuffix(".tmp")
            && !name.contains(".sync-conflict-") && name != engine.device
    }

    /// Watches `relative` under the folder remote and every folder in it (not this device's, not hidden ones), and
    /// marks the remote changed when files are already there (they may have arrived before the watch).
    func watchFolder(_ relative: String = "") {
        guard let root = folderRoot else { return }
        let mask: FileWatch.Events = [.closedAfterWriting, .movedIn, .created]
        var pending = [relative]
        while let next = pending.popLast() {
            let path = next.isEmpty ? root : root + "/" + next
            guard let number = try? watch.add(path, mask) else { continue }
            folderWatches[number] = next
            for name in (try? listDirectory(path)) ?? [] where isOthersFile(name) {
                let child = next.isEmpty ? name : next + "/" + name
                if (try? fileStatus(root + "/" + child, followingLinks: false))?.isDirectory == true {
                    pending.append(child)
                } else if !relative.isEmpty {
                    remote.note(clock.now, options)
                }
            }
        }
    }

    /// The device's clock (`sync_state.hlc`), which every captured change moves; nil when it cannot be read.
    func localClock() -> Int64? {
        try? engine.database.read { db in try db.scalar("SELECT hlc FROM sync_state WHERE singleton = 0", as: Int64.self) }
    }

    /// Whether rows changed here wait to be sent (the partial index `sync_rows_pending`: one lookup).
    func hasUnsentChanges() -> Bool {
        (try? engine.database.read { db in
            try db.scalar("SELECT EXISTS (SELECT 1 FROM sync_rows WHERE pending <> 0)", as: Int64.self)
        }) == 1
    }

    /// Syncs now. `again`: this sync was scheduled because a commit came during the previous one; it is not
    /// scheduled again however it ends (rows that stay unsent for another reason do not make a loop).
    func syncNow(_ cause: SyncWatchCause, again: Bool = false) {
        // A folder remote that was not there (an unmounted disk) is watched once it is.
        if folderRoot != nil && !folderWatches.values.contains("") { watchFolder() }
        do {
            let result = try engine.sync()
            clockAfterSync = localClock()
            if result.appliedBundles + result.sentBundles > 0 {
                changedSinceSnapshot = true
                changedSinceClean = true
            }
            // A commit made while this sync ran (its events are read after it) is not in what it sent.
            if !again && hasUnsentChanges() {
                syncAgain = true
                local.note(clock.now, options)
            }
            if failures > 0 {
                report(.recovered(result, failures: failures))
            } else {
                report(.synced(result, cause: cause))
            }
            failures = 0
            lastFailure = nil
            retryAt = nil
        } catch let error as SyncError {
            clockAfterSync = localClock()
            failed(error, cause)
        } catch {
            clockAfterSync = localClock()
            failed(SyncError(SyncError.Code.remote, "\(error)"), cause)
        }
    }

    /// Notes a failed sync: reported when its message is new; a remote that cannot be reached (or a database that is
    /// busy) is tried again after a growing wait, anything else at the next change.
    func failed(_ error: SyncError, _ cause: SyncWatchCause) {
        failures += 1
        let transient = error.code == SyncError.Code.remote
        var wait: Duration? = nil
        if transient {
            var backoff = options.firstBackoff
            for _ in 1..<min(failures, 20) where backoff < options.longestBackoff { backoff = backoff * 2 }
            wait = min(backoff, options.longestBackoff)
            retryAt = clock.now + wait!
        }
        if error.code == SyncError.Code.keyRotated || error.code == SyncError.Code.missingKey, let reopen = watcher.reopen,
            let fresh = try? reopen()
        {
            engine = fresh  // `sync rekey` ran in another process: the next attempt uses the new key
        }
        if lastFailure != error.message {
            lastFailure = error.message
            report(.failed(error, cause: cause, retryIn: wait))
        }
    }
}

/// One debounce timer: due `debounce` after the last change, and never later than `longestDebounce` after the first.
struct Debounce {
    var first: ContinuousClock.Instant?
    var due: ContinuousClock.Instant?

    mutating func note(_ now: ContinuousClock.Instant, _ options: SyncWatchOptions) {
        if first == nil { first = now }
        due = min(now + options.debounce, first! + options.longestDebounce)
    }

    func isDue(_ now: ContinuousClock.Instant) -> Bool { due.map { $0 <= now } ?? false }
}

extension SyncEngine {
    /// Whether the git remote's branch is not where this device last fetched or pushed it (`git ls-remote`: one
    /// request, nothing downloaded). False for a folder.
    func gitRemoteMoved() throws -> Bool {
        guard case .git = remote else { return false }
        let root = transport.root
        let (status, output) = try GitTransport.run(["ls-remote", "--heads", "origin", GitTransport.branch], in: root)
        guard status == 0 else {
            let last = output.split(separator: "\n").last.map(String.init) ?? ""
            throw SyncError(SyncError.Code.remote, "git ls-remote failed (\(status)): \(escapedForTerminal(last, limit: 300))")
        }
        let remoteHead = output.split(whereSeparator: { $0 == "\t" || $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
        let (_, tracking) = try GitTransport.run(["rev-parse", "--verify", "--quiet", "refs/remotes/origin/\(GitTransport.branch)"], in: root)
        return remoteHead != tracking.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
