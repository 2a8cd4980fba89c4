// File-system steps of the key lifecycle: the lock file, fsync, rename, directory sync, leftovers.
// Every file operation of the keyed database goes through this file, on SecureStoreCore's system layer.
internal import Attachments
internal import Foundation
internal import SecureStoreCore

/// The files of one keyed database: `<dir>/<name>.db`, its `-wal`/`-shm`, the lock file and the
/// rotation's temporary file.
struct KeyedDatabaseFiles: Sendable {
    /// The database file.
    let path: String
    /// The directory holding it.
    let directory: String
    /// The file that serializes lifecycle steps between processes: `.<name>.db.lock`.
    let lockPath: String
    /// Where rotation builds the copy under the new key: `.<name>.db.rotating`.
    let rotatingPath: String

    init(paths: AppPaths, name: String) {
        path = paths.databaseURL(name: name).path
        directory = paths.dataDirectory.path
        let file = (path as NSString).lastPathComponent
        lockPath = directory + "/." + file + ".lock"
        rotatingPath = directory + "/." + file + ".rotating"
    }

    /// Where a restore builds the restored database under its new key.
    var restoredPath: String { directory + "/." + (path as NSString).lastPathComponent + ".restored" }

    var walPath: String { path + "-wal" }

    // MARK: Inspecting

    static func exists(_ path: String) -> Bool { fileExists(path) }

    static func size(_ path: String) -> Int? { try? fileStatus(path).size }

    /// The first 16 bytes of the file, or nil when it cannot be read (or is not a regular file: never blocks).
    static func header(_ path: String) -> [UInt8]? {
        guard case .opened(let descriptor, _) = try? FileDescriptor.openRegularFile(path, followingLinks: true) else {
            return nil
        }
        return try? descriptor.closeAfter { () throws(Errno) in try descriptor.read(upTo: 16) }
    }

    /// Every leftover of an interrupted rotation: the rotating file, the temporary files export builds
    /// beside it (`..<name>.db.rotating.tmp-<random>`), and their `-wal`, `-shm` and `-journal`.
    func rotationLeftovers() -> [String] {
        let rotatingName = (rotatingPath as NSString).lastPathComponent
        let exportPrefix = "." + rotatingName + ".tmp-"
        let names = (try? listDirectory(directory)) ?? []
        return names.filter { $0 == rotatingName || $0.hasPrefix(rotatingName + "-") || $0.hasPrefix(exportPrefix) }
            .sorted().map { directory + "/" + $0 }
    }

    /// Removes every leftover of an interrupted rotation. They never hold the only copy of anything:
    /// the database file is replaced only by a finished, verified rotating file (a rename).
    func removeRotationLeftovers() throws {
        for leftover in rotationLeftovers() {
            try Self.removeIfPresent(leftover, "cannot remove the leftover of an interrupted key rotation '\(leftover)'")
        }
        if !rotationLeftovers().isEmpty { Self.syncDirectory(directory) }
    }

    /// Removes the temporary files an interrupted creation leaves (`.<name>.db.tmp-<random>` and their
    /// companions). Called only when the database file does not exist, under the exclusive lock.
    func removeCreationLeftovers() throws {
        let prefix = "." + (path as NSString).lastPathComponent + ".tmp-"
        let names = (try? listDirectory(directory)) ?? []
        for name in names where name.hasPrefix(prefix) {
            let leftover = directory + "/" + name
            try Self.removeIfPresent(leftover, "cannot remove the leftover of an interrupted creation '\(leftover)'")
        }
    }

    /// Removes what an interrupted restore leaves in the data directory (the unfinished restored file and
    /// its `-wal`/`-shm`/`-journal`). They never hold the only copy of anything: the backup is untouched
    /// and the database is replaced only by a rename of a finished file.
    func removeRestoreLeftovers() throws {
        for base in [restoredPath, restoredAttachmentsPath] {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                try Self.removeIfPresent(base + suffix, "cannot remove the leftover of an interrupted restore '\(base + suffix)'")
            }
        }
        let names = (try? listDirectory(directory)) ?? []
        let prefix = "." + (restoredPath as NSString).lastPathComponent + ".tmp-"
        for name in names where name.hasPrefix(prefix) { try? removeFile(directory + "/" + name) }
    }

    /// The attachments file of the database (``AttachmentStore/filePath(forDatabase:)``).
    var attachmentsPath: String { AttachmentStore.filePath(forDatabase: path) }

    /// Where a restore puts the backup's attachments file: the attachments file of ``restoredPath``.
    var restoredAttachmentsPath: String { AttachmentStore.filePath(forDatabase: restoredPath) }

    /// The marker of a restore past its commit point: `.<name>.db.restore-commit`. While it exists, the restored
    /// files are installed (by the restore, or by the next open, recovery or restore) before anything is opened.
    var restoreCommitPath: String { directory + "/." + (path as NSString).lastPathComponent + ".restore-commit" }

    /// Writes the commit marker of a restore (a temporary file, flushed, renamed into place, the directory
    /// flushed): after it, the restore is finished rather than undone. `withAttachments` says whether a restored
    /// attachments file replaces the attachments file, or the attachments file goes (the backup had none).
    func writeRestoreCommit(withAttachments: Bool) throws {
        try Self.writeMarker(restoreCommitPath, withAttachments ? "attachments\n" : "no attachments\n", what: "the restore's marker")
    }

    /// Writes the marker file `path` holding `text`: a temporary file, flushed, renamed into place, the directory
    /// flushed. `what` names it in errors.
    static func writeMarker(_ path: String, _ text: String, what: String) throws {
        let temporary = path + ".tmp"
        try? removeFile(temporary)
        do {
            let descriptor = try FileDescriptor.open(temporary, [.writeOnly, .create, .exclusive, .noFollow])
            try descriptor.closeAfter { () throws(Errno) in
                try descriptor.writeAll(Array(text.utf8))
                try descriptor.sync()
            }
        } catch {
            try? removeFile(temporary)
            throw errnoError(error, "cannot write \(what) '\(temporary)'")
        }
        try rename(temporary, over: path)
        syncDirectory(directoryPart(path))
    }

    /// Finishes a restore that reached its commit point (``restoreCommitPath`` exists), under the exclusive lock:
    /// the restored attachments file (or none) goes to the attachments path, then the restored database to the
    /// database path, each an atomic rename; then the marker goes. Each step is idempotent, so a kill during this
    /// is finished by the next call. Returns false when there is no such restore.
    @discardableResult
    func finishCommittedRestore(progress: (KeyedDatabase.RestoreStep) -> Void = { _ in }) throws -> Bool {
        guard Self.exists(restoreCommitPath) else { return false }
        let marker = String(decoding: (try? readFile(restoreCommitPath, maximumSize: 64)) ?? [], as: UTF8.self)
        // The database is renamed last: while the restored file waits, the attachments path is brought in line.
        if Self.exists(restoredPath) {
            if marker != "no attachments\n" {
                if Self.exists(restoredAttachmentsPath) { try Self.rename(restoredAttachmentsPath, over: attachmentsPath) }
            } else {
                try Self.removeIfPresent(attachmentsPath, "cannot remove '\(attachmentsPath)' to finish a restore")
            }
            Self.syncDirectory(directory)
            progress(.attachmentsInstalled)
            try Self.rename(restoredPath, over: path)
            Self.syncDirectory(directory)
        }
        progress(.installed)
        try Self.removeIfPresent(restoreCommitPath, "cannot remove the restore's marker '\(restoreCommitPath)'")
        Self.syncDirectory(directory)
        try removeRestoreLeftovers()
        return true
    }

    /// Removes `path` (a file found empty); a missing file is fine.
    func removeEmptyFile(_ path: String) throws {
        try Self.removeIfPresent(path, "cannot remove the empty file '\(path)'")
    }

    /// A new name for the database kept aside by a restore: `<name>.before-restore-<UTC time>.db`, with
    /// `-2`, `-3`… when taken.
    func asidePath(name: String) throws -> String {
        // ISO 8601's basic format, `20261123T161502Z`: no ':' (not allowed in some file systems' names).
        let stamp = timestampTextInSeconds(Date()).filter { $0 != "-" && $0 != ":" }
        var candidate = directory + "/\(name).before-restore-\(stamp).db"
        var serial = 2
        while Self.exists(candidate) {
            candidate = directory + "/\(name).before-restore-\(stamp)-\(serial).db"
            serial += 1
        }
        return candidate
    }

    /// A new private directory (0700) in the temporary directory (`$TMPDIR`, else `/tmp`), named as every scratch
    /// folder of the product: `.securestore-restore.check-<pid>-<random>`. Those of this user left by a process
    /// that no longer runs (killed during a restore) are removed first: they hold only an encrypted copy of a backup.
    static func makeScratchDirectory() throws -> String {
        let near = temporaryDirectory() + "/securestore-restore"
        ScratchFiles.sweep(directoryPart(near), name: namePart(near))
        do {
            return try ScratchFiles.makeDirectory(near: near)
        } catch {
            throw errnoError(error, "cannot create a temporary directory in '\(directoryPart(near))'")
        }
    }

    /// Removes a directory made by ``makeScratchDirectory()`` and the files in it.
    static func removeScratchDirectory(_ directory: String) { removeDirectoryAndFiles(directory) }

    /// Removes `path` when it is there; any failure but "not there" is the error `message` (and why).
    static func removeIfPresent(_ path: String, _ message: @autoclosure () -> String) throws {
        do {
            try removeFileIfPresent(path)
        } catch {
            throw errnoError(error, message())
        }
    }

    /// Whether `path` is a regular file (symbolic links followed).
    static func isRegularFile(_ path: String) -> Bool { (try? fileStatus(path))?.isRegularFile ?? false }

    /// Makes `destination` a new hard link to `source` (link(2): fails if `destination` exists).
    static func link(_ source: String, to destination: String) throws {
        do {
            try linkFile(source, to: destination)
        } catch {
            throw errnoError(error, "cannot link '\(source)' to '\(destination)'")
        }
    }

    // MARK: Directories and durability

    /// Creates `directory` and its missing parents with mode 0700.
    static func makeDirectories(_ directory: String) throws {
        do {
            try SecureStoreCore.makeDirectories(directory)
        } catch {
            if error.errno == .notDirectory {
                throw SecureStoreError(SecureStoreError.Code.fileSystem, "'\(error.path)' exists and is not a directory")
            }
            throw errnoError(error.errno, "cannot create the directory '\(error.path)'")
        }
    }

    /// Flushes a file's data and metadata to the disk.
    static func syncFile(_ path: String) throws { try syncFileToDisk(path) }

    /// Flushes a directory, so that a rename or link in it survives a power loss (best effort).
    static func syncDirectory(_ directory: String) {
        try? SecureStoreCore.syncDirectory(directory)
    }

    /// Links the finished file `temporary` to the new name `path` (failing if `path` exists: nothing is ever
    /// replaced), removes the temporary name and flushes the directory.
    static func publish(_ temporary: String, as path: String) throws {
        do {
            try linkFile(temporary, to: path)
        } catch {
            if error == .fileExists {
                throw SecureStoreError(
                    SecureStoreError.Code.alreadyExists, "'\(path)' already exists; a backup never replaces a file. Choose a new name")
            }
            throw errnoError(error, "cannot create '\(path)'")
        }
        try? removeFile(temporary)
        syncDirectory(directoryPart(path).isEmpty ? "." : directoryPart(path))
    }

    /// Atomically replaces `destination` with `source` (rename(2)).
    static func rename(_ source: String, over destination: String) throws {
        do {
            try renameFile(source, to: destination)
        } catch {
            throw errnoError(error, "cannot rename '\(source)' to '\(destination)'")
        }
    }

    /// Copies the file at `source` to the new file `destination` (mode 0600, created exclusively) and
    /// flushes it.
    static func copyNewFile(_ source: String, to destination: String) throws {
        do {
            try copyFile(source, to: destination, sync: true)
        } catch {
            throw errnoError(error.errno, "cannot copy '\(source)' to '\(destination)' (at '\(error.path)')")
        }
    }

    // MARK: The lock file

    /// Opens (creating, 0600) the lock file and takes a `flock` lock on it, waiting up to `timeout`
    /// milliseconds. Returns the descriptor, which holds the lock until closed.
    func lock(exclusive: Bool, timeoutMilliseconds: Int) throws -> Int32 {
        let opened: FileLock
        do {
            opened = try FileLock.open(lockPath)
        } catch where error == .readOnlyFileSystem {
            // A read-only file system: nothing can write the database, so readers need no lock from writers.
            // The lock file is still taken (shared) when it is there; without one, no lock (``noLockFile``).
            guard let readOnly = try? FileLock.open(lockPath, create: false, readOnly: true) else { return Self.noLockFile }
            _ = try? readOnly.tryLock(.shared)
            return readOnly.descriptor.rawValue
        } catch {
            if error == .tooManySymbolicLinkLevels {
                throw SecureStoreError(
                    SecureStoreError.Code.fileSystem,
                    "the lock file '\(lockPath)' is a symbolic link; SecureStore never follows links for its lock "
                        + "files (one planted there could create or change another file): remove it and try again")
            }
            throw Self.errnoError(error, "cannot open the lock file '\(lockPath)'")
        }
        do {
            try Self.relock(opened.descriptor.rawValue, exclusive: exclusive, timeoutMilliseconds: timeoutMilliseconds, path: path)
            return opened.descriptor.rawValue
        } catch {
            opened.close()
            throw error
        }
    }

    /// What ``lock(exclusive:timeoutMilliseconds:)`` returns on a read-only file system without a lock file: no
    /// descriptor, and nothing to lock against (no process can write there).
    static let noLockFile: Int32 = -2

    /// Marks a key rotation of the database in the lock file (an open-file-description lock on one byte far
    /// past its contents), without waiting: false when another handle or process holds the mark. `flock`
    /// converts a shared lock to exclusive and back by dropping it first, so a second rotation could slip into
    /// that gap; the mark is held across both conversions and tells it that a SecureStore process is rotating.
    /// Released by ``endRotation(_:)`` or when the descriptor closes.
    static func beginRotation(_ descriptor: Int32, path: String) throws -> Bool {
        do {
            return try FileDescriptor(rawValue: descriptor).tryLockRange(offset: 1 << 30, length: 1, exclusive: true)
        } catch {
            throw errnoError(error, "cannot lock '\(path)'")
        }
    }

    /// Releases the mark of ``beginRotation(_:path:)``.
    static func endRotation(_ descriptor: Int32) {
        _ = try? FileDescriptor(rawValue: descriptor).tryLockRange(offset: 1 << 30, length: 1, exclusive: false)
    }

    /// Changes the lock held through `descriptor` to shared or exclusive, waiting up to `timeout`.
    static func relock(_ descriptor: Int32, exclusive: Bool, timeoutMilliseconds: Int, path: String) throws {
        // No lock file on a read-only file system (see ``lock(exclusive:timeoutMilliseconds:)``): the writes that
        // an exclusive lock would guard fail there on their own, with the read-only error.
        guard descriptor >= 0 else { return }
        let deadline = ContinuousClock.now + .milliseconds(max(timeoutMilliseconds, 0))
        let locked: Bool
        do {
            locked = try FileLock(FileDescriptor(rawValue: descriptor)).lock(exclusive ? .exclusive : .shared, until: deadline)
        } catch {
            throw errnoError(error, "cannot lock '\(path)'")
        }
        if !locked {
                throw SecureStoreError(
                    SecureStoreError.Code.inUse,
                    exclusive
                        ? "the database '\(path)' is open in another process (or another handle); close it there and try again"
                        : "the database '\(path)' is busy with a key rotation, recovery or creation in another process; try again")
        }
    }

    /// The database id the lock file remembers (written by ``writeIDHint(_:to:)``), or nil. A hint only:
    /// the lock file is not encrypted and anyone may write it; the id inside the database decides.
    static func readIDHint(_ descriptor: Int32) -> String? {
        guard let buffer = try? FileDescriptor(rawValue: descriptor).read(upTo: 64, at: 0),
            buffer.count >= KeyedDatabaseKeyItem.idLength
        else { return nil }
        let text = String(decoding: buffer.prefix(KeyedDatabaseKeyItem.idLength), as: UTF8.self)
        return KeyedDatabaseKeyItem.isID(Substring(text)) ? text : nil
    }

    /// Records `id` in the lock file (held exclusively by the caller), so that the next open finds the key
    /// item without listing every key. Failures are ignored: it is only a hint.
    static func writeIDHint(_ id: String, to descriptor: Int32) {
        guard readIDHint(descriptor) != id else { return }
        let file = FileDescriptor(rawValue: descriptor)
        guard (try? file.resize(to: 0)) != nil else { return }
        try? file.writeAll(Array((id + "\n").utf8), at: 0)
    }

    /// Empties the lock file (held exclusively by the caller) of its database id hint, once the database is deleted.
    static func clearIDHint(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        try? FileDescriptor(rawValue: descriptor).resize(to: 0)
    }

    /// Takes the lock file of the database at `path` shared, if that lock file exists (it is never
    /// created here), waiting up to a second. Returns the descriptor, or -1 when there is no lock file.
    ///
    /// - Throws: ``SecureStoreError/Code/inUse`` when the lock is held exclusively (a rotation, recovery or
    ///   restore of that database is under way).
    static func lockIfPresent(forDatabase path: String) throws -> Int32 {
        let directory = (path as NSString).deletingLastPathComponent
        let lockPath = directory + "/." + (path as NSString).lastPathComponent + ".lock"
        guard let lock = try? FileLock.open(lockPath, create: false) else { return -1 }
        do {
            try relock(lock.descriptor.rawValue, exclusive: false, timeoutMilliseconds: 1_000, path: path)
            return lock.descriptor.rawValue
        } catch {
            lock.close()
            throw error
        }
    }

    static func unlock(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        FileDescriptor(rawValue: descriptor).close()
    }

    // MARK: Errors

    static func errnoError(_ error: Errno, _ what: String) -> SecureStoreError {
        SecureStoreError(error, what)
    }
}
