// Transports: a folder that a replication engine copies, or a git remote reached with the system `git`.
internal import Foundation
internal import SecureStoreCore
#if canImport(Glibc)
internal import Glibc
#endif

/// Where bundles travel. The layout under ``root`` is the same for both: `securestore-sync` (a plain marker),
/// `key-check` (sealed), `devices/<device id>/<sequence>-<hash>` (sealed bundles, each written once by its device).
protocol SyncTransport {
    /// The local directory that holds the layout.
    var root: String { get }
    /// Brings in what other devices published.
    func pull() throws
    /// Publishes files written under `root` (`paths` relative to it).
    func publish(_ paths: [String]) throws
    /// Whether something written earlier has not reached the remote yet (an interrupted publish).
    func hasUnpublished() throws -> Bool
}

enum SyncLayout {
    static let marker = "securestore-sync"
    static let markerText = Array("securestore sync 1\n".utf8)
    static let keyCheck = "key-check"
    static let devices = "devices"

    /// Writes `bytes` to `root/relative` through a temporary name in the same folder, fsynced, then renamed:
    /// a replication engine never copies half a file of ours. The file is 0600.
    static func writeAtomically(_ bytes: [UInt8], root: String, relative: String) throws {
        let path = root + "/" + relative
        do {
            try makeDirectories(directoryPart(path))
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot create the folder of '\(path)': \(error)")
        }
        // A folder of the remote replaced by a symbolic link (by whoever else writes there) must not make us write
        // elsewhere on this machine.
        let resolvedRoot = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        let resolvedFolder = URL(fileURLWithPath: directoryPart(path)).resolvingSymlinksInPath().path
        guard resolvedFolder == resolvedRoot || resolvedFolder.hasPrefix(resolvedRoot + "/") else {
            throw SyncError(
                SyncError.Code.remote,
                "'\(directoryPart(path))' leads out of the sync folder (a symbolic link); nothing was written")
        }
        let temporary = ScratchFiles.path(near: path)
        ScratchFiles.register(temporary)
        defer { ScratchFiles.unregister(temporary) }
        do {
            let fd = try FileDescriptor.open(temporary, [.writeOnly, .create, .exclusive], mode: 0o600)
            try fd.closeAfter { () throws(Errno) in
                try fd.writeAll(bytes)
                try fd.sync()
            }
            try renameFile(temporary, to: path)
            try syncDirectory(directoryPart(path))
        } catch {
            try? removeFileIfPresent(temporary)
            throw SyncError(SyncError.Code.remote, "cannot write '\(path)': \(error); nothing was published")
        }
    }

    /// The largest file read from the remote (a bundle holds at most 2 000 rows): 256 MiB.
    static let maximumFileSize = 256 << 20

    /// The whole of the regular file at `path`, never following a symbolic link in its place and never waiting on a
    /// FIFO or a device there (SecureStoreCore's non-blocking open): whoever else writes the remote cannot make this
    /// device read elsewhere on the machine or hang.
    static func read(_ path: String) throws -> [UInt8] {
        let opened: FileDescriptor.RegularFile
        do {
            opened = try FileDescriptor.openRegularFile(path)
        } catch {
            throw SyncError(
                SyncError.Code.remote,
                error == .tooManySymbolicLinkLevels
                    ? "'\(path)' is a symbolic link, not a file of ours; it was not followed" : "cannot read '\(path)': \(error)")
        }
        switch opened {
        case .missing:
            throw SyncError(SyncError.Code.remote, "cannot read '\(path)': it is not there")
        case .notRegular:
            throw SyncError(SyncError.Code.remote, "'\(path)' is not a regular file (a directory, FIFO, socket or device); it was not read")
        case .opened(let descriptor, let status):
            guard Int(status.st_size) <= maximumFileSize else {
                descriptor.close()
                throw SyncError(SyncError.Code.remote, "'\(path)' is \(status.st_size) bytes, more than any bundle; it was not read")
            }
            do {
                return try descriptor.closeAfter { () throws(Errno) in try descriptor.read(upTo: Int(status.st_size)) }
            } catch {
                throw SyncError(SyncError.Code.remote, "cannot read '\(path)': \(error)")
            }
        }
    }

    /// Whether `path` is itself a regular file (a symbolic link to one is not).
    static func isRegularFile(_ path: String) -> Bool {
        (try? fileStatus(path, followingLinks: false))?.isRegularFile ?? false
    }

    /// Whether `path` is itself a directory (a symbolic link to one is not).
    static func isDirectory(_ path: String) -> Bool {
        (try? fileStatus(path, followingLinks: false))?.isDirectory ?? false
    }

    /// The device folders under `root`, ignoring anything that is not a device id, and what is not a directory
    /// itself (a symbolic link named like a device: ``plantedEntries(root:)`` lists it).
    static func deviceIDs(root: String) -> [String] {
        let names = (try? listDirectory(root + "/" + devices)) ?? []
        return names.filter { SyncEngine.isDeviceID($0) && isDirectory(root + "/" + devices + "/" + $0) }.sorted()
    }

    /// The bundles of `device`, by sequence; other names (`.syncthing.*.tmp`, `*.sync-conflict-*`, Nextcloud's
    /// `.~` partials, our own temporaries) are ignored, and so is anything named like a bundle that is not a regular
    /// file itself (``plantedEntries(root:)`` lists those).
    static func bundles(root: String, device: String) -> [(sequence: UInt64, hash: String, path: String)] {
        let folder = root + "/" + devices + "/" + device
        let names = (try? listDirectory(folder)) ?? []
        return names.compactMap { name in
            SealedBundle.parseName(name).map { ($0.sequence, $0.hash, folder + "/" + name) }
        }.filter { isRegularFile($0.2) }.sorted { $0.sequence < $1.sequence }
    }

    /// What is named like a file or folder of ours under `root` (one key generation) but is not a regular file or a
    /// directory itself: a symbolic link, a FIFO, a socket or a device named like a bundle, a seen vector or an
    /// attachment's file, or anything but a directory named like a device's folder. Each is skipped by every reader
    /// (never opened, never followed); relative to `root`.
    static func plantedEntries(root: String) -> [String] {
        var planted: [String] = []
        let folders: [(String, (String) -> Bool)] = [
            (devices, { SealedBundle.parseName($0) != nil }),
            (SyncSeenFiles.folder, { $0.utf8.count == 10 && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
            (SyncEngine.attachmentsFolder, { $0.utf8.count == 64 && $0.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) } }),
        ]
        for (folder, isOurName) in folders {
            for device in ((try? listDirectory(root + "/" + folder)) ?? []).filter(SyncEngine.isDeviceID).sorted() {
                let path = folder + "/" + device
                guard isDirectory(root + "/" + path) else {
                    planted.append(path)
                    continue
                }
                for name in ((try? listDirectory(root + "/" + path)) ?? []).sorted()
                where isOurName(name) && !isRegularFile(root + "/" + path + "/" + name) {
                    planted.append(path + "/" + name)
                }
            }
        }
        return planted
    }
}

/// A folder replicated by Syncthing, Nextcloud, rclone or a USB disk.
struct FolderTransport: SyncTransport {
    let root: String
    func pull() throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SyncError(SyncError.Code.remote, "the sync folder '\(root)' does not exist (is the disk mounted?)")
        }
    }
    func publish(_ paths: [String]) throws {}
    func hasUnpublished() throws -> Bool { false }
}

/// A git remote: a clone of it kept beside the database, a cache — bundles are committed and pushed; a pull takes the
/// remote's history as it is and puts back only this device's own unpublished files (``pull()``). A push that loses a
/// race pulls and pushes again (our commits only touch files in our own folders, so this never merges files).
struct GitTransport: SyncTransport {
    let url: String
    let root: String
    /// This device's id: its own files are the only ones it ever pushes (nil while setting up: there are none).
    var device: String? = nil
    static let branch = "main"
    /// Git's empty tree: what "the remote held nothing" is compared with.
    static let emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

    static func run(_ arguments: [String], in directory: String?) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + ["-c", "user.name=securestore", "-c", "user.email=securestore@localhost",
            "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"] + arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["LC_ALL"] = "C"
        process.environment = environment
        // Output goes to a file, not a pipe: an ssh master git leaves behind may hold a pipe open for minutes.
        let log = ScratchFiles.path(near: temporaryDirectory() + "/securestore-git")
        guard FileManager.default.createFile(atPath: log, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: log)
        else { throw SyncError(SyncError.Code.remote, "cannot run git: no temporary file") }
        defer {
            try? handle.close()
            try? removeFileIfPresent(log)
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        do {
            try process.run()
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot run git (is it installed?): \(error)")
        }
        process.waitUntilExit()
        let output = String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
        return (process.terminationStatus, output)
    }

    static func check(_ arguments: [String], in directory: String?) throws {
        let (status, output) = try run(arguments, in: directory)
        guard status == 0 else {
            let last = output.split(separator: "\n").last.map(String.init) ?? ""
            throw SyncError(SyncError.Code.remote, "git \(arguments.first ?? "") failed (\(status)): \(escapedForTerminal(last, limit: 300))")
        }
    }

    /// The folders of this device's own files, in every key generation (git pathspecs).
    static func ownPathspecs(_ device: String) -> [String] {
        [
            SyncLayout.devices, SyncSeenFiles.folder, SyncSnapshotFiles.directory, SyncEngine.attachmentsFolder, SyncRosterFiles.folder,
            SyncGrantFiles.grants,
        ].flatMap {
            [":(glob)\($0)/\(device)/**", ":(glob)generation-*/\($0)/\(device)/**"]
        }
    }

    /// The group's files a device adds once (the marker and key check of a generation, the list of removed devices):
    /// pushed only when the remote has none (git pathspecs).
    static let groupPathspecs = [
        SyncLayout.marker, SyncLayout.keyCheck, ":(glob)generation-*/\(SyncLayout.marker)",
        ":(glob)generation-*/\(SyncLayout.keyCheck)", ":(glob)generation-*/\(SyncRemovedDevices.file)",
    ]

    /// Clones `url` into `root` unless it is there already. A clone there of another remote — left by an earlier
    /// database of this name that synced elsewhere — is refused: fetching from it, or pushing its commits there,
    /// would mix two groups.
    func prepare() throws {
        if FileManager.default.fileExists(atPath: root + "/.git") {
            let (status, output) = try Self.run(["remote", "get-url", "origin"], in: root)
            let origin = output.trimmingCharacters(in: .whitespacesAndNewlines)
            guard status == 0, origin == url else {
                throw SyncError(
                    SyncError.Code.remote,
                    "the git clone '\(root)' beside the database is of another remote ('\(escapedForTerminal(origin, limit: 200))'), "
                        + "left by an earlier database of this name; nothing was synced. This database does not need it: "
                        + "move it away (mv '\(root)' '\(root).old') and run the command again", path: root)
            }
            return
        }
        try? makeDirectories(directoryPart(root))
        try Self.check(["clone", "--quiet", "--", url, root], in: nil)
        _ = try? Self.run(["symbolic-ref", "HEAD", "refs/heads/\(Self.branch)"], in: root)
    }

    /// Our temporary files (`.<name>.tmp-<pid>-…`, left by a sync that was killed) are never committed.
    private func excludeTemporaryFiles() throws {
        let exclude = root + "/.git/info/exclude"
        let line = ".*.tmp-*"
        let present = (try? readFile(exclude)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        guard !present.split(separator: "\n").contains(Substring(line)) else { return }
        do {
            try makeDirectories(root + "/.git/info")
            let descriptor = try FileDescriptor.open(exclude, [.writeOnly, .create, .append, .noFollow], mode: 0o600)
            try descriptor.closeAfter { () throws(Errno) in
                try descriptor.writeAll(Array(((present.isEmpty || present.hasSuffix("\n") ? "" : "\n") + line + "\n").utf8))
            }
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot write '\(exclude)': \(error)")
        }
    }

    /// A rebase or merge left half done (by a sync of an earlier version killed or stopped by a conflict, or by a
    /// person) is abandoned: the clone is a cache of the remote, and every file in it is verified anyway.
    private func abandonInterruptedOperations() throws {
        let gitDirectory = root + "/.git"
        if fileExists(gitDirectory + "/rebase-merge") || fileExists(gitDirectory + "/rebase-apply") {
            _ = try Self.run(["rebase", "--abort"], in: root)
            if fileExists(gitDirectory + "/rebase-merge") || fileExists(gitDirectory + "/rebase-apply") {
                _ = try Self.run(["rebase", "--quit"], in: root)
            }
        }
        for (marker, command) in [("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert")]
        where fileExists(gitDirectory + "/" + marker) {
            _ = try Self.run([command, "--abort"], in: root)
        }
        // Whatever the abort left in the index or the tree (unmerged entries) goes: HEAD is what was committed.
        let (unmerged, output) = try Self.run(["ls-files", "--unmerged"], in: root)
        if unmerged != 0 || !output.isEmpty { try Self.check(["reset", "--quiet", "--hard", "HEAD"], in: root) }
    }

    /// The paths under `pathspecs` that differ from `base` to `head`, with git's status letter (A, M, D; renames off).
    private func changes(from base: String, to head: String, pathspecs: [String]) throws -> [(status: Character, path: String)] {
        let (status, output) = try Self.run(["diff", "--name-status", "--no-renames", "-z", base, head, "--"] + pathspecs, in: root)
        guard status == 0 else {
            throw SyncError(SyncError.Code.remote, "git diff failed (\(status)) in '\(root)'")
        }
        var fields = output.split(separator: "\0", omittingEmptySubsequences: true).map(String.init)[...]
        var result: [(Character, String)] = []
        while let letter = fields.popFirst(), let path = fields.popFirst() {
            result.append((letter.first ?? "M", path))
        }
        return result
    }

    /// Runs `git <arguments> --pathspec-from-file=… --pathspec-file-nul` with `paths` (literal): any number of them.
    private func withPaths(_ arguments: [String], _ paths: [String]) throws {
        guard !paths.isEmpty else { return }
        let list = root + "/.git/securestore-paths"
        do {
            try? removeFileIfPresent(list)
            let descriptor = try FileDescriptor.open(list, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o600)
            try descriptor.closeAfter { () throws(Errno) in try descriptor.writeAll(Array(paths.joined(separator: "\0").utf8) + [0]) }
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot write '\(list)': \(error)")
        }
        defer { try? removeFileIfPresent(list) }
        try Self.check(arguments + ["--pathspec-from-file=" + list, "--pathspec-file-nul"], in: root)
    }

    private func remoteHasBranch() throws -> Bool {
        let (status, output) = try Self.run(["ls-remote", "--heads", "origin", Self.branch], in: root)
        guard status == 0 else { throw SyncError(SyncError.Code.remote, "cannot reach the git remote '\(url)'") }
        return !output.isEmpty
    }

    /// Commits what an interrupted sync wrote or staged and did not commit (only ever our own new files), so that
    /// ``pull()`` finds it among this device's unpublished changes.
    private func commitLeftovers() throws {
        try Self.check(["add", "-A", "--", "."], in: root)
        let (clean, _) = try Self.run(["diff", "--cached", "--quiet"], in: root)
        if clean != 0 { try Self.check(["commit", "--quiet", "-m", Self.commitMessage], in: root) }
    }

    /// Whether local commits are not on the remote yet (a push that failed or was interrupted).
    func hasUnpublished() throws -> Bool {
        try commitLeftovers()
        let (hasHead, _) = try Self.run(["rev-parse", "--verify", "--quiet", "HEAD"], in: root)
        guard hasHead == 0 else { return false }
        let (status, output) = try Self.run(["rev-list", "--count", "HEAD", "--not", "--remotes"], in: root)
        return status != 0 || output.trimmingCharacters(in: .whitespacesAndNewlines) != "0"
    }

    /// Takes the remote's history as it is — fetched, and the clone reset to it, even when it was rewritten or rolled
    /// back (every file in it is verified anyway; a rollback is then seen by the engine) — and puts this device's own
    /// changes that the remote has not got yet back on top, as one commit: its files added, changed or removed since
    /// the remote-tracking state of the last fetch or push, and the group files it added that the remote lacks. Nobody
    /// else's commit is ever replayed or pushed (a rebase would replay every local commit the remote lacks, a tampering
    /// one included, and an interrupted one jammed the clone for good).
    func pull() throws {
        try prepare()
        try excludeTemporaryFiles()
        try abandonInterruptedOperations()
        try commitLeftovers()
        guard try remoteHasBranch() else { return }
        let tracking = "refs/remotes/origin/\(Self.branch)"
        let (hadTracking, trackingOutput) = try Self.run(["rev-parse", "--verify", "--quiet", tracking], in: root)
        try Self.check(["fetch", "--quiet", "origin", "+refs/heads/\(Self.branch):\(tracking)"], in: root)
        let (hasHead, headOutput) = try Self.run(["rev-parse", "--verify", "--quiet", "HEAD"], in: root)
        guard hasHead == 0 else {
            try Self.check(["reset", "--quiet", "--hard", tracking], in: root)
            return
        }
        // The commit whose own files go back on top, kept in a ref of ours across the reset: a pull killed after it
        // finds them there (compared with the remote it already fetched).
        let pending = "refs/securestore/unpublished"
        let (hadPending, pendingOutput) = try Self.run(["rev-parse", "--verify", "--quiet", pending], in: root)
        let head = (hadPending == 0 ? pendingOutput : headOutput).trimmingCharacters(in: .whitespacesAndNewlines)
        if hadPending != 0 { try Self.check(["update-ref", pending, head], in: root) }
        let base = hadTracking == 0 ? trackingOutput.trimmingCharacters(in: .whitespacesAndNewlines) : Self.emptyTree
        let own = try device.map { try changes(from: base, to: head, pathspecs: Self.ownPathspecs($0)) } ?? []
        var group: [String] = []
        for change in try changes(from: base, to: head, pathspecs: Self.groupPathspecs) where change.status == "A" {
            let (present, _) = try Self.run(["cat-file", "-e", "\(tracking):\(change.path)"], in: root)
            if present != 0 { group.append(change.path) }
        }
        try Self.check(["reset", "--quiet", "--hard", tracking], in: root)
        try withPaths(["checkout", head], own.filter { $0.status != "D" }.map(\.path) + group)
        try withPaths(["rm", "--quiet", "--ignore-unmatch"], own.filter { $0.status == "D" }.map(\.path))
        let (clean, _) = try Self.run(["diff", "--cached", "--quiet"], in: root)
        if clean != 0 {
            try Self.check(
                ["commit", "--quiet", "-m", Self.commitMessage], in: root)
        }
        try Self.check(["update-ref", "-d", pending], in: root)
    }

    /// Every commit's message: it says nothing a listing of the files does not (which device, which bundle, what
    /// kind of change were in the messages before: issue 35).
    static let commitMessage = "sync"

    func publish(_ paths: [String]) throws {
        try prepare()
        // Only our own new files can be there (the clone is ours; other devices' files come by fetch).
        try Self.check(["add", "-A", "--", "."], in: root)
        let (clean, _) = try Self.run(["diff", "--cached", "--quiet"], in: root)
        if clean != 0 { try Self.check(["commit", "--quiet", "-m", Self.commitMessage], in: root) }
        var lastError: (any Error)?
        for _ in 0..<8 {
            let (status, _) = try Self.run(["push", "--quiet", "origin", "HEAD:refs/heads/\(Self.branch)"], in: root)
            if status == 0 {
                // The remote-tracking state is what the remote holds now: the next pull puts back only what comes after.
                _ = try Self.run(["update-ref", "refs/remotes/origin/\(Self.branch)", "HEAD"], in: root)
                return
            }
            // Someone else pushed first: take theirs (new files in their folders) and put ours on top.
            do {
                try pull()
            } catch {
                lastError = error
            }
        }
        throw lastError ?? SyncError(SyncError.Code.remote, "git push to '\(url)' kept failing; the bundles stay committed locally and go with the next sync")
    }
}
