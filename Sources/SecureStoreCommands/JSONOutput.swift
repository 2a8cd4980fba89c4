// What `--json` prints: one Encodable type per document, encoded by Console.json's one JSONEncoder (sorted
// keys, slashes unescaped). Docs/cli.md lists the keys; an optional property that is nil is left out, except
// where a document says null.
import EncryptedDatabase
import Foundation
import Preferences
import SecureStore
import Tasks

/// A task as every `tasks` command prints it, with TaskItem's own keys (`id`, `title`, `done`, `createdAt`):
/// the ID in lower case as the text output shows it, the date in RFC 3339 (UTC, milliseconds).
struct TaskJSON: Encodable {
    let id: String
    let title: String
    let done: Bool
    let createdAt: String

    init(_ task: TaskItem) {
        id = task.id.uuidString.lowercased()
        title = task.title
        done = task.done
        // The stored microseconds, as export and `tasks list --json` write them: a task printed here and imported
        // back with --on-duplicate replace keeps its date.
        createdAt = task.createdAtText
    }
}

/// `tasks count`.
struct TaskCountJSON: Encodable {
    let count: Int
}

/// `tasks clear-done`.
struct TasksDeletedJSON: Encodable {
    let deleted: Int
}

/// `tasks done-all`.
struct TasksUpdatedJSON: Encodable {
    let updated: Int
}

/// `token set`.
struct TokenStoredJSON: Encodable {
    let name: String
    let stored: Bool
}

/// One entry of `token list`: never the value.
struct TokenJSON: Encodable {
    let name: String
    let label: String
}

/// A SQLCipher profile (`db info`'s `cipher`, `db verify`'s `encryption`).
struct CipherJSON: Encodable {
    let format: String
    let cipher: String
    let pageSize: Int
    let hmacAlgorithm: String
    let kdfAlgorithm: String
    let sqlcipherVersion: String
    let sqliteVersion: String
    let hmac: Bool
    let kdf: String

    init(_ info: CipherInfo) {
        format = info.format.name
        cipher = info.cipher
        pageSize = info.pageSize
        hmacAlgorithm = info.hmacAlgorithm
        kdfAlgorithm = info.kdfAlgorithm
        sqlcipherVersion = info.sqlcipherVersion
        sqliteVersion = info.sqliteVersion
        hmac = info.hmacAlgorithm != "none"
        kdf = "none: raw 256-bit key"
    }
}

/// `db info`.
struct DatabaseInfoJSON: Encodable {
    /// Where the key lives: `account` is null when no key is stored.
    struct Key: Encodable {
        let service: String
        let account: String?
        let collection: String
        let stored: Bool
        let retired: [String]

        private enum CodingKeys: String, CodingKey {
            case service, account, collection, stored, retired
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(service, forKey: .service)
            try container.encode(account, forKey: .account)  // null, not left out
            try container.encode(collection, forKey: .collection)
            try container.encode(stored, forKey: .stored)
            try container.encode(retired, forKey: .retired)
        }
    }

    let name: String
    let path: String
    let exists: Bool
    let key: Key
    let rotationPending: Bool
    let databaseId: String?
    let size: Int?
    let walSize: Int?
    let cipher: CipherJSON?

    init(_ info: KeyedDatabaseInfo, cipher: CipherInfo?) {
        name = info.name
        path = info.path
        exists = info.exists
        key = Key(
            service: info.keyService, account: info.keyAccount, collection: info.keyCollection, stored: info.hasKey,
            retired: info.retiredKeyAccounts)
        rotationPending = info.rotationPending
        databaseId = info.databaseID
        size = info.fileSize
        walSize = info.walSize
        self.cipher = cipher.map(CipherJSON.init)
    }
}

/// `db verify` and `db backup`.
struct VerificationJSON: Encodable {
    let path: String
    let size: Int
    let pageCount: Int
    let pageSize: Int
    let cipher: String
    let hmac: Bool
    let userVersion: Int
    let tables: Int
    let rows: Int
    let key: String
    let integrity: String
    let sqlcipherVersion: String?
    let encryption: CipherJSON

    init(_ report: KeyedDatabaseVerification) {
        path = report.path
        size = report.size
        pageCount = report.pageCount
        pageSize = report.pageSize
        cipher = report.cipher
        hmac = report.hmac
        userVersion = report.userVersion
        tables = report.tableCount
        rows = report.rowCount
        key = report.key.rawValue
        integrity = "ok"
        sqlcipherVersion = report.sqlcipherVersion
        encryption = CipherJSON(report.encryption)
    }
}

/// `db rotate-key`.
struct RotationJSON: Encodable {
    let databaseId: String
    let retiredKey: String
    let retiredAt: String
    let alsoOpens: [String]
}

/// `db restore`.
struct RestoreJSON: Encodable {
    let backup: String
    let path: String
    let databaseId: String
    let tables: Int
    let rows: Int
    /// The keyring account whose key opened the backup, or "recovery code".
    let openedWith: String
    let keptAside: String?
    /// How many attachments the restored database lists, each read back in full with its digest, and their bytes.
    let attachments: Int
    let attachmentBytes: Int64
    /// Where the attachments of the database that was there were kept, if it had any.
    let attachmentsKeptAside: String?

    init(_ report: KeyedDatabaseRestoreReport) {
        backup = report.backupPath
        path = report.path
        databaseId = report.databaseID
        tables = report.tableCount
        rows = report.rowCount
        openedWith = report.openedWithAccount ?? "recovery code"
        keptAside = report.asidePath
        attachments = report.attachmentCount
        attachmentBytes = report.attachmentBytes
        attachmentsKeptAside = report.attachmentsAsidePath
    }
}

/// One entry of `db keys list`: `fileExists` only with a `path`.
struct DatabaseKeyJSON: Encodable {
    let account: String
    let role: String
    let databaseId: String?
    let path: String?
    let fileExists: Bool?
    let retiredAt: String?
}

/// `db keys prune`: the accounts deleted.
struct PrunedKeysJSON: Encodable {
    let deleted: [String]
}

/// `prefs get`.
struct PreferenceJSON: Encodable {
    let key: String
    let type: String
    let value: PreferenceValueJSON
}

/// A preference value as JSON: Data as base64, Date as ISO 8601, a number that is not finite as text.
struct PreferenceValueJSON: Encodable {
    let value: PreferenceValue

    init(_ value: PreferenceValue) {
        self.value = value
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch value {
        case .string(let string): try container.encode(string)
        case .bool(let bool): try container.encode(bool)
        case .int(let int): try container.encode(int)
        case .double(let double): try double.isFinite ? container.encode(double) : container.encode(String(double))
        case .date(let date): try container.encode(ISO8601DateFormatter().string(from: date))
        case .data(let data): try container.encode(data.base64EncodedString())
        case .array(let array): try container.encode(array.map(PreferenceValueJSON.init))
        case .dictionary(let dictionary): try container.encode(dictionary.mapValues(PreferenceValueJSON.init))
        }
    }
}

/// `token delete`, `prefs delete`.
struct DeletedJSON: Encodable {
    let name: String
    let deleted: Bool
}

/// `prefs set`: the key and its type, never the value (it may be a secret stored with --force).
struct PreferenceStoredJSON: Encodable {
    let key: String
    let type: String
    let stored: Bool
}

/// `prefs move-to-keychain`.
struct PreferenceMovedJSON: Encodable {
    let key: String
    let token: String
    let moved: Bool
}

/// `prefs reset`: where the file was moved, or null when there was none.
struct PreferencesResetJSON: Encodable {
    let path: String
    let movedTo: String?

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(movedTo, forKey: .movedTo)  // null, not left out
    }

    private enum CodingKeys: String, CodingKey { case path, movedTo }
}

/// `db import-plaintext`, `db recover`: the database and its file.
struct DatabaseStoredJSON: Encodable {
    let name: String
    let path: String
    let databaseId: String
    /// `db import-plaintext`: the plaintext source, which is left in place.
    var source: String? = nil
}
