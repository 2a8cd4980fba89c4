// The engine's version and features, as the API reports them, against what the engine really does.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct DatabaseCapabilitiesTests {
    @Test func theVersionIsTheLinkedEngines() {
        let version = Database.sqliteVersion
        #expect(version.major == 3)
        #expect(version >= SQLiteVersion(3, 15, 2))
        #expect(version.description == "\(version.major).\(version.minor).\(version.patch)")
    }

    /// Every feature the API claims works in a real encrypted database, and every feature it denies fails there.
    @Test(arguments: DatabaseFeature.allCases)
    func aClaimedFeatureWorksAndADeniedOneFails(_ feature: DatabaseFeature) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let works: Bool
        do {
            try queue.write { db in
                try db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b, c)")
                try db.execute("INSERT INTO t (a, b, c) VALUES (1, '{\"k\":2}', 3)")
                switch feature {
                case .fts4: try db.execute("CREATE VIRTUAL TABLE f USING fts4(x)")
                case .fts5: try db.execute("CREATE VIRTUAL TABLE f USING fts5(x)")
                case .json: _ = try db.scalar("SELECT json_extract(b, '$.k') FROM t", as: Int.self)
                case .upsert: try db.execute("INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET c = 4")
                case .windowFunctions: _ = try db.scalar("SELECT sum(a) OVER () FROM t", as: Int.self)
                case .renameColumn: try db.execute("ALTER TABLE t RENAME COLUMN c TO d")
                case .dropColumn: try db.execute("ALTER TABLE t DROP COLUMN c")
                case .returning: _ = try db.scalar("DELETE FROM t RETURNING a", as: Int.self)
                }
            }
            works = true
        } catch {
            works = false
        }
        #expect(works == Database.supports(feature), "\(feature) on SQLite \(Database.sqliteVersion)")
        #expect(Database.supportedFeatures.contains(feature) == works)
    }

    @Test func debian12sEngineHasFTS4AndNothingNewer() {
        // Every engine we ship on has FTS4; the version decides the rest where no option is involved.
        #expect(Database.supports(.fts4))
        let version = Database.sqliteVersion
        #expect(Database.supports(.upsert) == (version >= SQLiteVersion(3, 24, 0)))
        #expect(Database.supports(.windowFunctions) == (version >= SQLiteVersion(3, 25, 0)))
        #expect(Database.supports(.renameColumn) == (version >= SQLiteVersion(3, 25, 0)))
        #expect(Database.supports(.dropColumn) == (version >= SQLiteVersion(3, 35, 0)))
        #expect(Database.supports(.returning) == (version >= SQLiteVersion(3, 35, 0)))
    }
}
