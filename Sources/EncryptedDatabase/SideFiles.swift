// The side files of a database (-wal, -shm, -journal): what SQLite would apply, and whether it belongs.
//
// SQLite trusts whatever valid-looking frames a `-wal` holds and whatever a hot `-journal` holds: it replays
// them into the database when the first connection opens or the last one closes, even after the key check
// failed. Frames are page images encrypted under some key with plaintext headers, so a `-wal` left by another
// database (or an older copy) would overwrite this one. Before a connection opens a file that has side files
// and no live user, they are therefore checked in a private copy (see `Preflight`).
internal import Foundation
internal import SecureStoreCore
internal import Synchronization

/// What a `-wal` file holds, read with SQLite's own rules (https://sqlite.org/fileformat2.html#walformat):
/// frames count only while their salts match the header's and their running checksum is right; only frames up
/// to the last commit frame are ever applied.
struct WriteAheadLog: Equatable {
    /// The header is a valid WAL header (magic, version, header checksum).
    var headerIsValid = false
    /// The page size the header names.
    var pageSize = 0
    /// The number of frames SQLite would apply: the valid frames up to the last commit frame.
    var committedFrames = 0

    static let headerSize = 32
    static let frameHeaderSize = 24

    /// Reads the log at `path` frame by frame (a log can be large; it is never read whole into memory); nil
    /// when it does not exist or is empty.
    static func read(_ path: String) throws -> WriteAheadLog? {
        do {
            guard case .opened(let descriptor, let status) = try FileDescriptor.openRegularFile(path) else {
                return nil
            }
            return try descriptor.closeAfter { () throws(Errno) -> WriteAheadLog? in
                if status.st_size == 0 { return nil }
                guard let header = try descriptor.read(exactly: headerSize, at: 0) else { return WriteAheadLog() }
                var failure: Errno?
                let log = parse(header: header) { offset, count in
                    do throws(Errno) {
                        return try descriptor.read(exactly: count, at: offset)
                    } catch {
                        failure = error
                        return nil
                    }
                }
                if let failure { throw failure }
                return log
            }
        } catch {
            throw Opening.errnoError(error, "cannot read '\(path)'")
        }
    }

    /// Parses the 32-byte `header`, then frames read through `frame(offset, count)` (nil past the end).
    static func parse(header bytes: [UInt8], frame read: (Int, Int) -> [UInt8]?) -> WriteAheadLog {
        var log = WriteAheadLog()
        let magic = word(bytes, 0)
        guard magic == 0x377f_0682 || magic == 0x377f_0683, word(bytes, 4) == 3_007_000 else { return log }
        let bigEndian = magic & 1 == 1
        let pageSize = Int(word(bytes, 8))
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return log }
        var sum = checksum(bytes, 0, 24, bigEndian: bigEndian, seed: (0, 0))
        guard sum.0 == word(bytes, 24), sum.1 == word(bytes, 28) else { return log }
        log.headerIsValid = true
        log.pageSize = pageSize
        let salt = (word(bytes, 16), word(bytes, 20))
        let frameSize = frameHeaderSize + pageSize
        var offset = headerSize
        var count = 0
        while let frame = read(offset, frameSize) {
            guard word(frame, 8) == salt.0, word(frame, 12) == salt.1 else { break }
            sum = checksum(frame, 0, 8, bigEndian: bigEndian, seed: sum)
            sum = checksum(frame, frameHeaderSize, pageSize, bigEndian: bigEndian, seed: sum)
            guard sum.0 == word(frame, 16), sum.1 == word(frame, 20) else { break }
            count += 1
            if word(frame, 4) != 0 { log.committedFrames = count }
            offset += frameSize
        }
        return log
    }

    private static func word(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    /// SQLite's WAL checksum over `count` bytes (a multiple of 8) starting at `offset`.
    private static func checksum(
        _ bytes: [UInt8], _ offset: Int, _ count: Int, bigEndian: Bool, seed: (UInt32, UInt32)
    ) -> (UInt32, UInt32) {
        var (s0, s1) = seed
        var index = offset
        while index < offset + count {
            let a: UInt32, b: UInt32
            if bigEndian {
                a = word(bytes, index)
                b = word(bytes, index + 4)
            } else {
                a = UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]) << 16
                    | UInt32(bytes[index + 3]) << 24
                b = UInt32(bytes[index + 4]) | UInt32(bytes[index + 5]) << 8 | UInt32(bytes[index + 6]) << 16
                    | UInt32(bytes[index + 7]) << 24
            }
            s0 = s0 &+ a &+ s1
            s1 = s1 &+ b &+ s0
            index += 8
        }
        return (s0, s1)
    }
}

/// The files SQLite keeps beside a database, and who is using the database right now.
struct SideFiles {
    let path: String
    var wal: String { path + "-wal" }
    var shm: String { path + "-shm" }
    var journal: String { path + "-journal" }

    /// The side files that exist.
    var existing: [String] { [wal, shm, journal].filter { (try? fileStatus($0)) != nil } }

    /// The size of the rollback journal, 0 when there is none.
    var journalSize: Int { (try? fileStatus(journal).size) ?? 0 }

    /// Whether another connection has the database open right now: one in this process (see `OpenFiles`),
    /// or one in another process, which holds a read lock on SQLite's shared-lock range of the file for as
    /// long as it is open in WAL mode. Its side files are then live and were checked by that connection.
    func isInUse() -> Bool {
        guard let identity = FileIdentity(path) else { return false }
        if OpenFiles.contains(identity) { return true }
        guard let descriptor = try? FileDescriptor.open(path, [.readOnly, .noFollow]) else { return false }
        // SQLite's unix locking: PENDING at 0x40000000, RESERVED at +1, SHARED over the 510 bytes after.
        return descriptor.closeAfter { descriptor.isRangeLockedByOthers(offset: 0x4000_0000, length: 512) }
    }
}

/// A file's device and inode: what "the same database" means across paths and links.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init?(_ path: String) {
        guard let status = try? fileStatus(path) else { return nil }
        device = status.device
        inode = status.inode
    }
}

/// The database files this process has open through a ``DatabaseQueue`` (POSIX locks do not tell a process
/// about its own connections).
enum OpenFiles {
    private static let counts = Mutex<[FileIdentity: Int]>([:])

    static func contains(_ identity: FileIdentity) -> Bool {
        counts.withLock { $0[identity, default: 0] > 0 }
    }

    static func insert(_ identity: FileIdentity) {
        counts.withLock { $0[identity, default: 0] += 1 }
    }

    static func remove(_ identity: FileIdentity) {
        counts.withLock { counts in
            let count = counts[identity, default: 0] - 1
            counts[identity] = count > 0 ? count : nil
        }
    }
}
