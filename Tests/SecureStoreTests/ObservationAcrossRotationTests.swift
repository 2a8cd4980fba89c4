// Observing a keyed database: its own writes wake the observation through the hooks of whichever connection is
// open, before and after a key rotation replaces that connection.
import EncryptedDatabase
import Foundation
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct ObservationAcrossRotationTests {
    init() throws { try Harness.require() }

    @Test func anObservationOfAKeyedDatabaseSeesItsWritesAfterAKeyRotation() async throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database, rows: 3)
        // Polled once an hour: every value after the first comes from the hooks.
        let counts = database.observe(tables: ["item"], interval: .seconds(3600)) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        var iterator = counts.makeAsyncIterator()
        #expect(try await iterator.next() == 3)
        try await database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (3, 'before')") }
        #expect(try await iterator.next() == 4)

        try await database.rotateKey()
        // A new connection under the new key, with hooks of its own; the rotation itself changed no row.
        try await database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (4, 'after')") }
        #expect(try await iterator.next() == 5, "the write after the rotation wakes the observation")
        try await database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (5, 'again')") }
        #expect(try await iterator.next() == 6)
        try database.close()
    }
}
