// Opening a second connection to a database this process has open keeps the process's POSIX locks on it: closing
// any descriptor of a file drops every such lock, so a second open must not open and close the file itself.
import EncryptedDatabase
import Foundation
import Glibc
import TestSupport
import Testing

@Suite struct ProcessLockTests {
    /// The POSIX read locks this process holds on `path` that cover SQLite's SHARED range (0x40000002…), from
    /// /proc/locks (`id: POSIX ADVISORY READ pid maj:min:inode start end`; F_GETLK does not show a process its own).
    private func sharedLocks(on path: String) throws -> Int {
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? UInt64)
        let text = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        return text.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, fields[1] == "POSIX", fields[3] == "READ", fields[4] == "\(getpid())",
                fields[5].split(separator: ":").last == "\(inode)", let start = Int(fields[6])
            else { return false }
            return start <= 0x4000_0002 && (fields[7] == "EOF" || Int(fields[7]).map { $0 >= 0x4000_0002 } == true)
        }.count
    }

    /// A WAL connection holds a SHARED lock on the database file for as long as it is open, which tells another
    /// process's last connection that it is not the last (or it would checkpoint the whole -wal into the file under
    /// a read transaction here). A second queue on the file used to open and close it to read its header, dropping
    /// that lock: an online backup then copied rows without their index entries while another process wrote.
    @Test func aSecondQueueOnAnOpenDatabaseKeepsTheProcessSharedLock() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/locks.db"
        let first = try makeItemDatabase(path, key: try testKey(), titles: ["a", "b"])
        defer { try? first.close() }
        _ = try titles(first)
        try #require(try sharedLocks(on: path) > 0, "a WAL connection holds SQLite's SHARED lock")
        var readOnly = DatabaseConfiguration()
        readOnly.readOnly = true
        let second = try DatabaseQueue(path: path, key: try testKey(), configuration: readOnly)
        #expect(try sharedLocks(on: path) > 0, "the process still holds its SHARED lock after a second open")
        #expect(try titles(second) == ["a", "b"])
        try second.close()
        #expect(try sharedLocks(on: path) > 0, "and after the second queue closed")
    }
}
