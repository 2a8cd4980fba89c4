// What the SQLite engine inside the linked SQLCipher can do, measured from the engine itself.
internal import CSQLCipher

/// A SQLite version number, such as 3.15.2 (inside Debian 12's SQLCipher 3.4.1) or 3.46.1 (Debian 13's 4.6.1).
///
/// ```swift
/// import EncryptedDatabase
///
/// if Database.sqliteVersion < SQLiteVersion(3, 24, 0) {
///     print("no native UPSERT in SQLite", Database.sqliteVersion)
/// }
/// ```
public struct SQLiteVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The major version (3).
    public let major: Int
    /// The minor version (15 in 3.15.2).
    public let minor: Int
    /// The patch version (2 in 3.15.2).
    public let patch: Int

    /// The version `major.minor.patch`.
    public init(_ major: Int, _ minor: Int, _ patch: Int = 0) {
        self.major = major
        self.minor = minor
        self.patch = patch
    }

    /// The version from SQLite's number `X*1000000 + Y*1000 + Z`.
    init(number: Int) {
        self.init(number / 1_000_000, number / 1000 % 1000, number % 1000)
    }

    /// `3.15.2`.
    public var description: String { "\(major).\(minor).\(patch)" }

    /// Orders versions by major, then minor, then patch.
    public static func < (lhs: SQLiteVersion, rhs: SQLiteVersion) -> Bool {
        (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
    }
}

/// A feature of SQL that some SQLite engines lack. Check one with ``Database/supports(_:)``.
///
/// Debian 12's SQLCipher 3.4.1 carries SQLite 3.15.2: it has ``fts4`` and nothing else of this list. Debian 13's
/// SQLCipher 4.6.1 (SQLite 3.46.1) has all of them. What the library does where the engine lacks a feature is
/// in Docs/database.md ("What the engine can do").
public enum DatabaseFeature: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Full-text search with FTS4 (`CREATE VIRTUAL TABLE … USING fts4`).
    case fts4
    /// Full-text search with FTS5 (`USING fts5`; SQLite 3.9 when compiled in).
    case fts5
    /// The JSON functions (`json_extract`, `json_object`, …; built in from SQLite 3.38, an option before).
    case json
    /// `INSERT … ON CONFLICT (…) DO UPDATE` (SQLite 3.24).
    case upsert
    /// Window functions (`… OVER (…)`, SQLite 3.25).
    case windowFunctions
    /// `ALTER TABLE … RENAME COLUMN` (SQLite 3.25).
    case renameColumn
    /// `ALTER TABLE … DROP COLUMN` (SQLite 3.35).
    case dropColumn
    /// `INSERT/UPDATE/DELETE … RETURNING` (SQLite 3.35).
    case returning

    /// The feature's name, as in its raw value.
    public var description: String { rawValue }

    /// A statement that compiles (or, for the full-text engines, runs) only when the engine has the feature,
    /// on a connection that holds the table `t(a PRIMARY KEY, b)`.
    fileprivate var probe: (sql: String, runs: Bool) {
        switch self {
        case .fts4: ("CREATE VIRTUAL TABLE temp.probe_fts4 USING fts4(x)", true)
        case .fts5: ("CREATE VIRTUAL TABLE temp.probe_fts5 USING fts5(x)", true)
        case .json: ("SELECT json_extract('{\"a\":1}', '$.a')", false)
        case .upsert: ("INSERT INTO t (a, b) VALUES (1, 1) ON CONFLICT (a) DO UPDATE SET b = excluded.b", false)
        case .windowFunctions: ("SELECT count(*) OVER () FROM t", false)
        case .renameColumn: ("ALTER TABLE t RENAME COLUMN b TO c", false)
        case .dropColumn: ("ALTER TABLE t DROP COLUMN b", false)
        case .returning: ("DELETE FROM t RETURNING a", false)
        }
    }
}

extension Database {
    /// The version of SQLite inside the linked SQLCipher library (3.15.2 on Debian 12, 3.46.1 on Debian 13).
    ///
    /// The corresponding C function is `sqlite3_libversion_number`.
    public static var sqliteVersion: SQLiteVersion { EngineFeatures.version }

    /// The features of ``DatabaseFeature`` that the linked engine has, measured once per process: each one
    /// by compiling (for FTS, running) a statement that uses it on a private in-memory connection, not by
    /// reading a table of version numbers, so an engine built without an option is told apart.
    public static var supportedFeatures: Set<DatabaseFeature> { EngineFeatures.supported }

    /// Whether the linked engine has `feature`.
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// let engine = Database.supports(.fts5) ? "fts5" : "fts4"
    /// ```
    public static func supports(_ feature: DatabaseFeature) -> Bool { EngineFeatures.supported.contains(feature) }

    /// The version of SQLite this connection runs: ``Database/sqliteVersion``.
    public var sqliteVersion: SQLiteVersion { Database.sqliteVersion }

    /// Whether the engine of this connection has `feature`: ``Database/supports(_:)``.
    public func supports(_ feature: DatabaseFeature) -> Bool { Database.supports(feature) }
}

/// The measurements behind ``Database/supportedFeatures``, made once per process.
private enum EngineFeatures {
    static let version = SQLiteVersion(number: Int(sqlite3_libversion_number()))

    static let supported: Set<DatabaseFeature> = {
        var connection: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_MEMORY | SQLITE_OPEN_NOMUTEX
        defer { sqlite3_close_v2(connection) }
        guard sqlite3_open_v2(":memory:", &connection, flags, nil) == SQLITE_OK, let connection,
            sqlite3_exec(connection, "CREATE TABLE t (a INTEGER PRIMARY KEY, b)", nil, nil, nil) == SQLITE_OK
        else { return [] }
        return Set(DatabaseFeature.allCases.filter { feature in
            let (sql, runs) = feature.probe
            if runs { return sqlite3_exec(connection, sql, nil, nil, nil) == SQLITE_OK }
            var statement: OpaquePointer?
            defer { sqlite3_finalize(statement) }
            return sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK
        })
    }()
}
