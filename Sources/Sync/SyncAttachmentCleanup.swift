// Cleaning attachment chunks (Docs/sync.md, "Cleaning the remote", "Attachment chunks"): a device removes from its own
// folder the chunks and manifests no attachment it knows needs, once it has seen them unreferenced for a grace period
// and every known device has published a seen vector that covers the moment it first did; a device that holds an
// attachment's bytes writes again, at every sync, whatever of them is missing from the remote.
internal import EncryptedDatabase
internal import Foundation
internal import SecureStore
internal import SecureStoreCore
internal import Synchronization

/// The chunk names of manifests already opened in this process, by manifest name (hex). Content-addressed: a name
/// under a key has one content, so an entry never goes stale; only authenticated manifests are kept.
private let openedManifests = Mutex<[String: [String]]>([:])

extension SyncEngine {
    /// How long a chunk or manifest of this device must stay unreferenced before ``clean(attachmentGrace:)`` removes
    /// it: 7 days (a device that still relies on it — another device's attachment of the same bytes whose description
    /// is on its way — has had that long to deliver it).
    public static let defaultAttachmentGrace: Duration = .seconds(7 * 24 * 3600)

    static let unreferencedSQL = """
        CREATE TABLE IF NOT EXISTS sync_unreferenced_chunks (
            name TEXT PRIMARY KEY, since INTEGER NOT NULL, vector TEXT NOT NULL) WITHOUT ROWID
        """

    /// The chunk names (hex) in the manifest named `hex` at `path`; nil when it is not a manifest that authenticates.
    func manifestChunks(_ hex: String, path: String, keys: SyncAttachmentKeys) -> [String]? {
        if let known = openedManifests.withLock({ $0[hex] }) { return known }
        guard let name = bytes(fromHex: hex), SyncLayout.isRegularFile(path), let file = try? SyncLayout.read(path),
            file.count > SyncAttachmentKeys.magic.count, file[SyncAttachmentKeys.magic.count] == SyncAttachmentKeys.manifestKind,
            let opened = keys.open(file, name: name, kind: SyncAttachmentKeys.manifestKind),
            let manifest = SyncAttachmentManifest.decode(opened)
        else { return nil }
        let chunks = manifest.chunks.map(hexString)
        openedManifests.withLock { $0[hex] = chunks }
        return chunks
    }

    /// Whether the file at `path` says it is a manifest (its kind byte; read without the rest of the file).
    static func isManifestFile(_ path: String) -> Bool {
        guard SyncLayout.isRegularFile(path), let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: SyncAttachmentKeys.magic.count + 1)) ?? Data()
        return head.count == SyncAttachmentKeys.magic.count + 1 && head.last == SyncAttachmentKeys.manifestKind
    }

    /// The 64-hex-digit names of regular files in `folder` (a symbolic link, a folder, a temporary name: not listed).
    static func attachmentNames(in folder: String) -> [String] {
        guard SyncLayout.isDirectory(folder) else { return [] }
        return ((try? listDirectory(folder)) ?? []).filter { name in
            name.utf8.count == 64 && name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
                && SyncLayout.isRegularFile(folder + "/" + name)
        }.sorted()
    }

    /// Which of this device's attachment files no attachment needs, noted with the moment this device first saw
    /// each so (`sync_unreferenced_chunks`), and of those the ones to remove now: unreferenced for `grace` and every
    /// known device's published seen vector covers this device's vector at that moment, and this device has applied
    /// that device's bundles up to its own position there. Manifests first, then chunks. Only this device's folder
    /// of this generation, only regular files (never through a symbolic link).
    ///
    /// Needed: the manifest of every attachment described here (all of `securestore_attachments`), and every chunk
    /// named by a manifest on the remote that opens — any device's, this device's own unless it is itself unneeded.
    func unreferencedAttachmentFiles(grace: Duration, roster: SyncRoster) throws -> (remove: [String], kept: Int, waitingFor: [String]) {
        let folder = layoutRoot + "/" + Self.attachmentsFolder
        guard SyncLayout.isDirectory(layoutRoot + "/" + Self.attachmentsFolder) else { return ([], 0, []) }
        let ownFolder = folder + "/" + device
        let own = Self.attachmentNames(in: ownFolder)
        let store = AttachmentStore(database: database)
        defer { try? store.close() }
        let keys = SyncAttachmentKeys(key)
        let neededManifests = Set(try store.allAttachments().map { hexString(keys.manifestName($0)) })
        var referenced = neededManifests
        for other in ((try? listDirectory(folder)) ?? []).filter(Self.isDeviceID) {
            for name in Self.attachmentNames(in: folder + "/" + other) {
                // This device's own manifests that nothing needs do not keep their chunks.
                if other == device && !neededManifests.contains(name) { continue }
                let path = folder + "/" + other + "/" + name
                guard neededManifests.contains(name) || Self.isManifestFile(path), let chunks = manifestChunks(name, path: path, keys: keys)
                else { continue }
                referenced.formUnion(chunks)
            }
        }
        let candidates = own.filter { !referenced.contains($0) }
        let now = microsecondsSince1970(Date())
        let graceMicroseconds = grace.components.seconds * 1_000_000 + grace.components.attoseconds / 1_000_000_000_000
        // Every known device's newest published vector (nil: none yet, which holds removal back).
        var published: [String: SyncVector?] = [:]
        for other in try knownDevices(roster: roster) where other != device {
            published[other] = .some(SyncSeenFiles.newest(root: layoutRoot, device: other, key: key, accept: { bytes in
                roster.accepts(bytes, device: other, sequence: 0, generation: self.generation)
            })?.vector)
        }
        var waiting = Set<String>()
        let eligible: [String] = try database.write { db in
            try db.execute(Self.unreferencedSQL)
            let mine = try SyncVector.current(db, device: device, name: "")
            var noted: [String: (since: Int64, vector: String)] = [:]
            try db.forEachRow("SELECT name, since, vector FROM sync_unreferenced_chunks") { row in
                noted[try row.string(at: 0)] = (try row.int64(at: 1), try row.string(at: 2))
            }
            // Referenced again, or gone: forgotten (a later unreference starts the wait again).
            let current = Set(candidates)
            for name in noted.keys where !current.contains(name) {
                try db.execute("DELETE FROM sync_unreferenced_chunks WHERE name = ?", [name])
            }
            var eligible: [String] = []
            for name in candidates {
                guard let entry = noted[name] else {
                    try db.execute("INSERT INTO sync_unreferenced_chunks (name, since, vector) VALUES (?, ?, ?)", [name, now, mine.text])
                    if graceMicroseconds > 0 { continue }
                    let behind = Self.behind(published, needed: mine, mine: mine)
                    if behind.isEmpty { eligible.append(name) } else { waiting.formUnion(behind) }
                    continue
                }
                guard now - entry.since >= graceMicroseconds, let needed = SyncVector(text: entry.vector) else { continue }
                let behind = Self.behind(published, needed: needed, mine: mine)
                if behind.isEmpty { eligible.append(name) } else { waiting.formUnion(behind) }
            }
            return eligible
        }
        // Manifests before chunks: a manifest on the remote always means its chunks are there.
        let manifests = Set(eligible.filter { Self.isManifestFile(ownFolder + "/" + $0) })
        let ordered = eligible.filter(manifests.contains) + eligible.filter { !manifests.contains($0) }
        return (ordered.map { ownFolder + "/" + $0 }, candidates.count - ordered.count, waiting.sorted())
    }

    /// The known devices that have not published a vector covering `needed`, or whose bundles up to their own
    /// position in it this device has not applied (as for pruning tombstones).
    static func behind(_ published: [String: SyncVector?], needed: SyncVector, mine: SyncVector) -> [String] {
        published.keys.sorted().filter { other in
            guard let theirs = published[other] ?? nil else { return true }
            return !theirs.covers(needed) || mine[other] < theirs[other]
        }
    }

    /// Forgets a removed file's entry (after it is gone from the remote).
    func forgetUnreferenced(_ names: [String]) throws {
        guard !names.isEmpty else { return }
        try database.write { db in
            for name in names { try db.execute("DELETE FROM sync_unreferenced_chunks WHERE name = ?", [name]) }
        }
    }

    /// Whether every chunk of the manifest named `hex` (on the remote at `path`) is on the remote: a device that holds
    /// an attachment's bytes writes again what another device's cleanup removed (its own files of the same bytes).
    func chunksPresent(_ hex: String, path: String, remote: [String: String], keys: SyncAttachmentKeys) -> Bool {
        // A manifest that does not open here is not this device's to judge: the fetch names it.
        guard let chunks = manifestChunks(hex, path: path, keys: keys) else { return true }
        return chunks.allSatisfy { remote[$0] != nil }
    }
}
