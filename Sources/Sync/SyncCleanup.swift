// Cleanup: a device removes from the remote its own bundles that a snapshot holds and every known device has
// applied, so the remote stops growing; a device that still needs them starts from the snapshot (SyncSnapshot.swift).
internal import Foundation
internal import EncryptedDatabase
internal import SecureStoreCore

/// What ``SyncEngine/clean(attachmentGrace:)`` did (Docs/sync.md, "Cleaning the remote").
public struct SyncCleanReport: Sendable, Equatable {
    /// The sync that ran first.
    public var sync = SyncReport()
    /// This device's bundles removed from the remote (the oldest ones: numbers 1 through ``cleanedThrough``).
    public var removedBundles = 0
    /// This device's older or incomplete snapshots removed (their folders).
    public var removedSnapshots = 0
    /// This device's superseded seen-vector files removed.
    public var removedSeenFiles = 0
    /// This device's files in older key generations removed (bundles, seen vectors, snapshots, attachment chunks:
    /// a generation that is not the newest is read by no device that can sync, Docs/sync.md "Removing a device").
    public var removedOldGenerationFiles = 0
    /// Files of removed devices in older key generations, removed once every other device on this generation's
    /// roster has published a seen vector in it (Docs/sync.md, "Removing a device").
    public var removedFilesOfRemovedDevices = 0
    /// Devices on this generation's roster that have published no seen vector in it yet: they hold back the removal
    /// of removed devices' files in older generations.
    public var removedDevicesFilesWaitFor: [String] = []
    /// Temporary files that a killed sync of this device left in its own folders of the remote, removed.
    public var removedTemporaryFiles = 0
    /// This device's attachment chunks and manifests removed: no attachment this device knows needed them for the
    /// grace period, and every known device had published a seen vector covering the moment they became unneeded
    /// (Docs/sync.md, "Attachment chunks").
    public var removedAttachmentFiles = 0
    /// The bytes of those attachment files (counted in ``removedBytes`` too).
    public var removedAttachmentBytes: Int64 = 0
    /// This device's attachment files no attachment needs that stay for now: within the grace period, waiting for
    /// ``attachmentsWaitingFor`` to sync, or not looked at because this device is not caught up (a bundle is
    /// missing or was refused).
    public var unreferencedAttachmentFiles = 0
    /// Devices whose published seen vector does not cover the moment an attachment file became unneeded yet.
    public var attachmentsWaitingFor: [String] = []
    /// The bytes of all the files removed.
    public var removedBytes: Int64 = 0
    /// This device's bundles numbered up to this one are gone from the remote now (0: none).
    public var cleanedThrough: Int64 = 0
    /// This device's bundles still on the remote.
    public var keptBundles = 0
    /// The snapshot that holds the removed bundles (relative to the remote's root), or nil when none verified.
    public var snapshot: String?
    /// Devices whose published seen vector has not reached what the snapshot holds of this device: they hold back
    /// the removal of the bundles they have not applied (none: only the snapshot, or the newest bundle, limits it).
    public var waitingFor: [String] = []
}

extension SyncEngine {
    /// Syncs, then removes from the remote this device's own bundles that a snapshot holds and that every known device
    /// has applied (by its published seen vector), together with this device's older snapshots and seen-vector files,
    /// and its files in older key generations.
    /// Only files this device wrote are removed: in a folder they are unlinked, in git a commit deletes them (the
    /// history keeps them, sealed). The newest bundle of this device is always kept (it carries the chain on). A
    /// device that still needs a removed bundle (one restored from an older backup) starts from the snapshot.
    ///
    /// It also removes this device's attachment chunks and manifests that no attachment it knows needs, once they
    /// have been unneeded for `attachmentGrace` and every known device has published a seen vector covering the
    /// moment this device first saw them so — never while a bundle is missing or refused here (a description in it
    /// may need them). A device that holds the bytes writes again at its next sync what another device removed.
    ///
    /// ```swift
    /// let cleaned = try engine.clean()
    /// print("removed \(cleaned.removedBundles) bundles (\(cleaned.removedBytes) bytes)")
    /// ```
    ///
    /// - Parameter attachmentGrace: how long an attachment file stays unneeded before it goes
    ///   (``defaultAttachmentGrace``: 7 days).
    /// - Throws: what ``sync()`` throws: a remote that cannot be reached (nothing is removed then), or — after the
    ///   cleanup, which goes on around it — a refused or missing bundle; or ``SyncError/Code-swift.struct/remote``.
    @discardableResult
    public func clean(attachmentGrace: Duration = SyncEngine.defaultAttachmentGrace) throws -> SyncCleanReport {
        try withSyncLock {
            var report = SyncCleanReport()
            // A refused or planted file is no reason to stop cleaning this device's own files: the cleanup goes on
            // around it, and the sync's refusal is reported afterwards.
            let failure: SyncError?
            (report.sync, failure) = try syncRound()
            // Attachment files only when caught up: a bundle not applied yet may describe an attachment that needs them.
            let caughtUp = failure == nil && report.sync.missingBundles.isEmpty
            try cleanLocked(&report, attachmentGrace: caughtUp ? attachmentGrace : nil)
            if var failure {
                failure.report = report.sync
                throw failure
            }
            return report
        }
    }

    private func cleanLocked(_ report: inout SyncCleanReport, attachmentGrace: Duration?) throws {
        let root = layoutRoot
        let recorded = try database.read { db in try db.scalar("SELECT sequence FROM sync_state", as: Int64.self) ?? 0 }
        let own = SyncLayout.bundles(root: root, device: device)
        var removed: [String] = []
        func remove(_ path: String) {
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            guard (try? removeFileIfPresent(path)) != nil else { return }
            report.removedBytes += Int64(size)
            removed.append(path)
        }

        // The snapshot that holds most of this device's chain, checked whole (a device in the gap will need every
        // part), its hash of this device's bundle that of the bundle on the remote.
        var ignored: [String] = [], skipped: [String] = []
        var held: Int64 = 0
        // What a device signed is believed only when its key is on the roster: a snapshot or a seen vector written by a
        // holder of the sync key in another device's name cannot make this device remove its bundles early.
        let roster = try readRoster()
        for candidate in snapshotCandidates(refused: &ignored, skipped: &skipped, roster: roster).sorted(by: { $0.manifest.vector[device] > $1.manifest.vector[device] }) {
            guard let entry = candidate.manifest.vector.entries[device], entry.sequence > 0 else { break }
            if let bundle = own.first(where: { $0.sequence == UInt64(entry.sequence) }), bundle.hash != hexString(entry.hash) { continue }
            guard candidate.manifest.parts.indices.allSatisfy({ snapshotPart(candidate, $0) != nil }) else { continue }
            held = entry.sequence
            report.snapshot = candidate.shown
            break
        }
        // Every known device (removed ones are not waited for) must have applied what goes.
        var applied = Int64.max
        for other in try knownDevices(roster: roster).subtracting([device]).sorted() {
            let theirs = SyncSeenFiles.newest(root: root, device: other, key: key, accept: { bytes in
                roster.accepts(bytes, device: other, sequence: 0, generation: self.generation)
            })?.vector[device] ?? 0
            if theirs < held { report.waitingFor.append(other) }
            applied = min(applied, theirs)
        }
        let newest = Int64(own.last?.sequence ?? 0)
        let through = max(0, min(held, applied, recorded, newest - 1))
        // Oldest first: a cleanup killed half way leaves the chain's newer part, which is what a gap looks like.
        for bundle in own where bundle.sequence <= UInt64(through) {
            remove(bundle.path)
            report.removedBundles += 1
        }
        report.cleanedThrough = through
        report.keptBundles = SyncLayout.bundles(root: root, device: device).count
        removeSentCopies(through: through)  // SyncChainHeads.swift: a snapshot holds them now

        // Temporary files of a sync of this device that was killed (`.<name>.tmp-<pid>-…` of a process that no longer
        // runs, often empty): in its own folders only, where no other device writes.
        for folder in [SyncLayout.devices, SyncSeenFiles.folder, Self.attachmentsFolder] {
            let mine = root + "/" + folder + "/" + device
            guard SyncLayout.isDirectory(mine) else { continue }
            for leftover in ScratchFiles.leftovers(in: mine) {
                remove(leftover)
                report.removedTemporaryFiles += 1
            }
        }

        // This device's attachment chunks and manifests that nothing needs (SyncAttachmentCleanup.swift).
        if let attachmentGrace {
            let unreferenced = try unreferencedAttachmentFiles(grace: attachmentGrace, roster: roster)
            var gone: [String] = []
            for path in unreferenced.remove {
                let before = report.removedBytes
                remove(path)
                guard removed.last == path else { continue }
                report.removedAttachmentFiles += 1
                report.removedAttachmentBytes += report.removedBytes - before
                gone.append(namePart(path))
            }
            try forgetUnreferenced(gone)
            report.unreferencedAttachmentFiles = unreferenced.kept + unreferenced.remove.count - gone.count
            report.attachmentsWaitingFor = unreferenced.waitingFor
        } else {
            report.unreferencedAttachmentFiles = try database.read { db in
                guard try db.tableExists("sync_unreferenced_chunks") else { return 0 }
                return try db.scalar("SELECT count(*) FROM sync_unreferenced_chunks", as: Int.self) ?? 0
            }
        }

        // This device's snapshots other than its newest complete one (left by a `sync snapshot` that was interrupted).
        let snapshots = SyncSnapshotFiles.numbers(root: root, device: device)
        if let keep = snapshots.first(where: {
            FileManager.default.fileExists(atPath: root + "/" + SyncSnapshotFiles.folder(device: device, number: $0) + "/" + SyncSnapshotFiles.manifest)
        }) {
            for number in snapshots where number < keep {
                let folder = root + "/" + SyncSnapshotFiles.folder(device: device, number: number)
                for name in (try? listDirectory(folder)) ?? [] { remove(folder + "/" + name) }
                try? removeDirectory(folder)
                report.removedSnapshots += 1
            }
        }
        // Seen vectors other than the newest (a sync killed before it removed them).
        for number in SyncSeenFiles.numbers(root: root, device: device).dropFirst() {
            remove(root + "/" + SyncSeenFiles.relative(device: device, number: number))
            report.removedSeenFiles += 1
        }
        // Older key generations: every device that syncs is on this one (a device on an older key is told to re-key
        // and syncs nothing until it has; then it starts this generation afresh), so its own files there are read by
        // nobody. The marker and key check stay (they say which generation is the newest); other devices' folders are
        // theirs to remove (a removed device's stay: remove them by hand).
        // Removes `owner`'s folders in the older generation `older`; returns how many files went.
        func removeOlderGenerationFiles(of owner: String, in older: Int) -> Int {
            var count = 0
            let olderRoot = Self.layoutRoot(transport.root, generation: older)
            for folder in [SyncLayout.devices, SyncSeenFiles.folder, SyncSnapshotFiles.directory, Self.attachmentsFolder] {
                let mine = olderRoot + "/" + folder + "/" + owner
                var directories: [String] = []
                var pending = [mine]
                // Folders of ours only, each a directory itself: a symbolic link on the way is not followed.
                guard [olderRoot, olderRoot + "/" + folder].allSatisfy(SyncLayout.isDirectory) else { continue }
                while let directory = pending.popLast() {
                    guard SyncLayout.isDirectory(directory), let names = try? listDirectory(directory) else { continue }
                    directories.append(directory)
                    for name in names {
                        let path = directory + "/" + name
                        // Never through a symbolic link (it is removed itself, not what it points at).
                        if SyncLayout.isDirectory(path) {
                            pending.append(path)
                        } else {
                            remove(path)
                            count += 1
                        }
                    }
                }
                for directory in directories.reversed() { try? removeDirectory(directory) }
            }
            return count
        }
        for older in 1..<max(1, generation) {
            report.removedOldGenerationFiles += removeOlderGenerationFiles(of: device, in: older)
        }
        // A removed device's files there: once every other device that stays — on this generation's roster, or with a
        // folder in an older generation — has published a verified seen vector here, every device that can sync has
        // re-keyed into this generation (and undone, in its own database, what the removed device sent after its
        // removal), so nobody reads them again. A device that never re-keys holds this back until it is removed too,
        // as it holds back pruning. Any device that stays removes them then: two removals of one file never conflict
        // (in git, one that loses a push race is dropped by the pull and done again by the next cleanup). Roster
        // statements stay: a device on the old key reads its removal there.
        if generation > 1 {
            let removedDevices = try removedDeviceIDs(roster: roster).subtracting([device])
            var stays = Set(roster.members.keys)
            for older in 1..<generation { stays.formUnion(SyncLayout.deviceIDs(root: Self.layoutRoot(transport.root, generation: older))) }
            let others = stays.subtracting(removedDevices).subtracting([device]).filter { roster.removed[$0] == nil }
            let everyoneHere = others.allSatisfy { other in
                SyncSeenFiles.newest(root: root, device: other, key: key, accept: { bytes in
                    roster.accepts(bytes, device: other, sequence: 0, generation: self.generation)
                }) != nil
            }
            if everyoneHere {
                for older in 1..<generation {
                    for removedDevice in removedDevices.sorted() where Self.isDeviceID(removedDevice) {
                        report.removedFilesOfRemovedDevices += removeOlderGenerationFiles(of: removedDevice, in: older)
                    }
                }
            } else {
                report.removedDevicesFilesWaitFor = others.filter { other in
                    SyncSeenFiles.newest(root: root, device: other, key: key, accept: { bytes in
                        roster.accepts(bytes, device: other, sequence: 0, generation: self.generation)
                    }) == nil
                }.sorted()
            }
        }
        if !removed.isEmpty {
            try? syncDirectory(root + "/" + SyncLayout.devices + "/" + device)
            try transport.publish(
                [])
        }
    }
}
