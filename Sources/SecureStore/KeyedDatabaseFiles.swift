// File-system steps of the key lifecycle: fsync, rename, directory sync, leftovers (the lock file is
// KeyedDatabaseLock.swift). Every file operation of the keyed database goes through these two files, on
// SecureStoreCore's system layer.
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

    /// The files of the keyed database whose file is at `databasePath` (another database of the application, found
    /// in the key catalogue), in the folder that holds it.
    init(databasePath: String) {
        path = databasePath
        directory = (databasePath as NSString).deletingLastPathComponent
        let file = (databasePath as NSString).lastPathComponent
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

    // MARK: Errors

    static func errnoError(_ error: Errno, _ what: String) -> SecureStoreError {
        SecureStoreError(error, what)
    }
}
