// What `--json` prints: one Encodable type per document, encoded by Console.json's one JSONEncoder (sorted
// keys, slashes unescaped). One vocabulary (Docs/cli.md, "JSON output"; a schema per command in Docs/json):
// record IDs as lower-case UUIDs with dashes, references to them as `<thing>Id`, every timestamp in RFC 3339 UTC
// with six fractional digits (``timestampText(_:)``), a past-tense verb (`deleted`, `stored`, `moved`…) a count,
// a state (`done`, `exists`, `inline`) a Bool, and a value that does not apply null (``Nullable``), never left out.
internal import EncryptedDatabase
internal import Foundation
internal import Preferences
internal import SecureStore
internal import SecureStoreCore
internal import Tasks

/// A task as every `tasks` command prints it, with TaskItem's own keys (`id`, `title`, `done`, `createdAt`):
/// the ID in lower case with dashes, the date in RFC 3339 (UTC, six fractional digits).
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

/// A property that is encoded as `null` when it is nil, where a synthesized Encodable would leave the key out:
/// every document has every key of its schema.
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

/// `token set`, `token generate`: `stored` is how many tokens were stored (1).
struct TokenStoredJSON: Encodable {
    let name: String
    var stored = 1
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
    /// Where the key lives: `exists` says whether one is stored, `account` is null when none is.
    struct Key: Encodable {
        let service: String
        @Nullable var account: String?
        let collection: String
        let exists: Bool
        let retired: [String]
    }

    let name: String
    let path: String
    let exists: Bool
    let key: Key
    let rotationPending: Bool
    @Nullable var databaseId: String?
    @Nullable var size: Int?
    @Nullable var walSize: Int?
    @Nullable var cipher: CipherJSON?

    init(_ info: KeyedDatabaseInfo, cipher: CipherInfo?) {
        name = info.name
        path = info.path
        exists = info.exists
        key = Key(
            service: info.keyService, account: info.keyAccount, collection: info.keyCollection, exists: info.hasKey,
            retired: info.retiredKeyAccounts)
        rotationPending = info.rotationPending
        databaseId = info.databaseID
        size = info.fileSize
        walSize = info.walSize
        self.cipher = cipher.map(CipherJSON.init)
    }
}

/// `db verify` and `db backup`: the file checked, and the same `cipher` object as `db info`.
struct VerificationJSON: Encodable {
    let path: String
    let size: Int
    let pageCount: Int
    let userVersion: Int
    let tables: Int
    let rows: Int
    /// Which stored key opened it (`current`, `pending`, `retired`) and that key's keyring account.
    let keyRole: String
    let keyAccount: String
    let integrity: String
    @Nullable var databaseId: String?
    let cipher: CipherJSON

    init(_ report: KeyedDatabaseVerification) {
        path = report.path
        size = report.size
        pageCount = report.pageCount
        userVersion = report.userVersion
        tables = report.tableCount
        rows = report.rowCount
        keyRole = report.key.rawValue
        keyAccount = report.keyAccount
        integrity = "ok"
        databaseId = report.databaseID
        cipher = CipherJSON(report.encryption)
    }
}

/// `db rotate-key`: the keyring account of the key it retired, and when.
struct RotationJSON: Encodable {
    let databaseId: String
    let retiredAccount: String
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
    /// The keyring account whose key opened the backup; null when its recovery code did.
    @Nullable var openedWithAccount: String?
    @Nullable var keptAside: String?
    /// How many attachments the restored database lists, each read back in full with its digest, and their bytes.
    let attachments: Int
    let attachmentBytes: Int64
    /// Where the attachments of the database that was there were kept, if it had any.
    @Nullable var attachmentsKeptAside: String?

    init(_ report: KeyedDatabaseRestoreReport) {
        backup = report.backupPath
        path = report.path
        databaseId = report.databaseID
        tables = report.tableCount
        rows = report.rowCount
        openedWithAccount = report.openedWithAccount
        keptAside = report.asidePath
        attachments = report.attachmentCount
        attachmentBytes = report.attachmentBytes
        attachmentsKeptAside = report.attachmentsAsidePath
    }
}

/// One entry of `db keys list`: `fileExists` null without a `path`, `retiredAt` null but for a retired key.
struct DatabaseKeyJSON: Encodable {
    let account: String
    let role: String
    @Nullable var databaseId: String?
    @Nullable var path: String?
    @Nullable var fileExists: Bool?
    @Nullable var retiredAt: String?
}

/// `db keys prune`: how many keys it deleted, and their accounts.
struct PrunedKeysJSON: Encodable {
    let deleted: Int
    let accounts: [String]
}

/// `prefs get`.
struct PreferenceJSON: Encodable {
    let key: String
    let type: String
    let value: PreferenceValueJSON
}

/// A preference value as JSON: Data as base64, Date as every timestamp (RFC 3339, UTC, six fractional digits), a
/// number that is not finite as text.
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
        case .date(let date): try container.encode(timestampText(date))
        case .data(let data): try container.encode(data.base64EncodedString())
        case .array(let array): try container.encode(array.map(PreferenceValueJSON.init))
        case .dictionary(let dictionary): try container.encode(dictionary.mapValues(PreferenceValueJSON.init))
        }
    }
}

/// `token delete`: `deleted` is how many tokens were deleted (1).
struct TokenDeletedJSON: Encodable {
    let name: String
    var deleted = 1
}

/// `prefs delete`: `deleted` is how many preferences were deleted (1).
struct PreferenceDeletedJSON: Encodable {
    let key: String
    var deleted = 1
}

/// `prefs set`: the key and its type, never the value (it may be a secret stored with --force).
struct PreferenceStoredJSON: Encodable {
    let key: String
    let type: String
    var stored = 1
}

/// `prefs move-to-keychain`: `moved` is how many preferences were moved (1).
struct PreferenceMovedJSON: Encodable {
    let key: String
    let token: String
    var moved = 1
}

/// `prefs import`: how many values the document held (each stored), and the preferences file.
struct PreferencesImportedJSON: Encodable {
    let imported: Int
    let path: String
}

/// `prefs reset`: where the file was moved, or null when there was none.
struct PreferencesResetJSON: Encodable {
    let path: String
    @Nullable var movedTo: String?
}

/// `db import-plaintext`, `db recover`: the database and its file.
struct DatabaseStoredJSON: Encodable {
    let name: String
    let path: String
    let databaseId: String
    /// `db import-plaintext`: the plaintext source, which is left in place.
    var source: String? = nil
}
