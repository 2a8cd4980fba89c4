// The keyed database's reading connections (opt-in, `readerCount:`): reads run on them beside the writing
// connection, and go on while a key rotation or a backup holds the handle; only the swap of the file waits for them.
internal import EncryptedDatabase
internal import Foundation
internal import Glibc

/// The reading connections of one keyed database handle. Reads take a free connection (waiting for one when all are
/// in use); ``pause()`` makes new reads wait, waits for the running ones and closes every connection, so that the
/// file can be replaced; ``resume(_:)`` installs connections to the new file. `@unchecked Sendable`: every field is
/// guarded by `condition`.
final class KeyedDatabaseReaders: @unchecked Sendable {
    /// How many reading connections the handle keeps.
    let count: Int
    private let condition = NSCondition()
    /// The free connections (guarded by `condition`).
    private var idle: [DatabaseQueue]
    /// How many reads run now.
    private var reading = 0
    /// Whether reads wait for ``resume(_:)``.
    private var paused = false
    /// Why reads fail for good (the handle was closed or deleted), or nil.
    private var closedReason: String?
    /// The threads inside a read, to refuse a nested read or a write inside a read (either could deadlock).
    private var threads: Set<UInt> = []
    /// The database path, for messages.
    private let path: String

    init(_ connections: [DatabaseQueue], path: String) {
        count = connections.count
        idle = connections
        self.path = path
    }

    /// Opens `count` reading connections to the database at `path` with `key`.
    static func open(count: Int, path: String, key: DatabaseKey, configuration: DatabaseConfiguration) throws -> [DatabaseQueue] {
        var connections: [DatabaseQueue] = []
        do {
            for _ in 0..<count { connections.append(try DatabaseQueue(path: path, key: key, configuration: configuration)) }
        } catch {
            for connection in connections { try? connection.close() }
            throw error
        }
        return connections
    }

    /// Whether the calling thread is inside a read of these connections.
    var isReadingOnThisThread: Bool {
        let thread = UInt(pthread_self())
        condition.lock()
        defer { condition.unlock() }
        return threads.contains(thread)
    }

    /// Runs `body` in one read transaction of a free connection: a snapshot of the last commit before it began.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        let thread = UInt(pthread_self())
        condition.lock()
        if threads.contains(thread) {
            condition.unlock()
            throw DatabaseError(
                .misuse,
                "read was called inside another read of the same database '\(path)'; use the db given to the outer "
                    + "closure (a nested read could wait for itself)")
        }
        while closedReason == nil && (paused || idle.isEmpty) { condition.wait() }
        if let closedReason {
            condition.unlock()
            throw DatabaseError(.misuse, "the database '\(path)' is closed: \(closedReason)")
        }
        let connection = idle.removeLast()
        reading += 1
        threads.insert(thread)
        condition.unlock()
        defer {
            condition.lock()
            idle.append(connection)
            reading -= 1
            threads.remove(thread)
            condition.broadcast()
            condition.unlock()
        }
        return try connection.read(body)
    }

    /// Makes new reads wait, waits for the running ones to end, and closes every connection. Returns whether it
    /// paused (false when already paused or closed).
    @discardableResult
    func pause() -> Bool {
        condition.lock()
        guard !paused, closedReason == nil else {
            condition.unlock()
            return false
        }
        paused = true
        while reading > 0 { condition.wait() }
        let connections = idle
        idle = []
        condition.unlock()
        for connection in connections { try? connection.close() }
        return true
    }

    /// Installs `connections` (to the file as it is now) and lets waiting reads go on.
    func resume(_ connections: [DatabaseQueue]) {
        condition.lock()
        if closedReason != nil {
            condition.unlock()
            for connection in connections { try? connection.close() }
            return
        }
        let replaced = idle
        idle = connections
        paused = false
        condition.broadcast()
        condition.unlock()
        for connection in replaced { try? connection.close() }
    }

    /// Closes the connections for good: reads waiting and later ones throw `misuse` with `reason`.
    func close(reason: String) {
        pause()
        condition.lock()
        if closedReason == nil { closedReason = reason }
        condition.broadcast()
        condition.unlock()
    }
}

extension KeyedStore {
    /// The key that opens the file of database `id` now, for new reading connections: the current key, or (while
    /// making it current waits for the keyring's approval) the pending one.
    func readerKey(id: String) throws -> DatabaseKey {
        for account in [items.currentAccount(id: id), items.pendingAccount(id: id)] {
            guard let key = try items.key(account: account) else { continue }
            if (try? DatabaseQueue(path: files.path, key: key, configuration: configuration).close()) != nil { return key }
        }
        throw missingKeyError()
    }
}

extension KeyedDatabase {
    /// Opens this handle's reading connections again on the file as it is now, with `key` (or the stored key), after
    /// a ``KeyedDatabaseReaders/pause()``; closes them for good (reads then throw) when that fails.
    func resumeReaders(key: DatabaseKey? = nil) {
        guard let readers else { return }
        do {
            let key = try key ?? store.readerKey(id: databaseID)
            readers.resume(try KeyedDatabaseReaders.open(count: readers.count, path: files.path, key: key, configuration: configuration))
        } catch {
            readers.close(reason: "its reading connections could not be opened again (\(error))")
        }
    }
}
