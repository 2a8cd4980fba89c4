// The on-disk format: one named profile, pinned on every open and export, readable by SQLCipher 3 and 4.
internal import CSQLCipher
internal import Synchronization

/// A SQLCipher file format: the cipher settings a file was written with. A file opens only under the
/// settings it was written with, so they are named, applied on every open and every export, and never
/// change.
///
/// SecureStore writes its databases in one format, ``secureStore`` (`securestore-1`): SQLCipher 3's algorithms
/// with 4096-byte pages; attachment files use the same algorithms with 32 KiB pages
/// (``secureStoreAttachments``). SQLCipher 3.4 (Debian 12) and 4.x (Debian 13, Ubuntu 24.04) both read and write it, so a
/// file moves between systems in both directions. SQLCipher 4's own default format uses HMAC-SHA512, which
/// SQLCipher 3 cannot read at all.
///
/// ```swift
/// let info = try queue.cipherInfo()
/// print(info.format.name)          // "securestore-1"
/// ```
public struct CipherFormat: Sendable, Hashable, CustomStringConvertible {
    /// A short stable name, e.g. `"securestore-1"` or `"sqlcipher4-default"`.
    public let name: String
    /// What the format is, for a person: e.g. "SQLCipher 4's default format".
    public let summary: String
    /// The page size in bytes (`PRAGMA cipher_page_size`).
    public let pageSize: Int
    /// The page authentication algorithm (`PRAGMA cipher_hmac_algorithm`): `HMAC_SHA1`, `HMAC_SHA256`,
    /// `HMAC_SHA512`, or `none`.
    public let hmacAlgorithm: String
    /// The key derivation algorithm (`PRAGMA cipher_kdf_algorithm`), also used with 2 iterations to derive
    /// the HMAC key from a raw key: `PBKDF2_HMAC_SHA1`, `PBKDF2_HMAC_SHA256` or `PBKDF2_HMAC_SHA512`.
    public let kdfAlgorithm: String
    /// PBKDF2 iterations for a passphrase (`PRAGMA kdf_iter`); raw keys skip this derivation.
    public let kdfIterations: Int
    /// The cipher: `AES-256-CBC` for every format SQLCipher 3 and 4 write.
    public let cipher = "AES-256-CBC"

    /// `name (summary)`.
    public var description: String { "\(name) (\(summary))" }

    /// SecureStore's format, `securestore-1`: AES-256-CBC, 4096-byte pages, HMAC-SHA1, PBKDF2-HMAC-SHA1 with
    /// 64 000 iterations for passphrases. It is SQLCipher 3's default with a 4096-byte page, which SQLCipher 4
    /// reads after `PRAGMA cipher_compatibility = 3` followed by `PRAGMA cipher_page_size = 4096`.
    public static let secureStore = CipherFormat(
        name: "securestore-1", summary: "SQLCipher 3 algorithms with 4096-byte pages", pageSize: 4096,
        hmacAlgorithm: "HMAC_SHA1", kdfAlgorithm: "PBKDF2_HMAC_SHA1", kdfIterations: 64_000)

    /// The format of SecureStore's attachment files, `securestore-attachments-1`: the algorithms of
    /// ``secureStore`` (AES-256-CBC, HMAC-SHA1, PBKDF2-HMAC-SHA1) with 32 768-byte pages. Attachments are large
    /// blobs read and written once, and SQLCipher's cost is per page (pager, HMAC set-up, overflow chain): 32 KiB
    /// pages read 1.3-1.4× faster than 4 KiB pages and write large objects 1.1-1.4× faster (Docs/attachments.md).
    /// SQLCipher 3.4 and 4.x both read and write it.
    public static let secureStoreAttachments = CipherFormat(
        name: "securestore-attachments-1", summary: "SQLCipher 3 algorithms with 32768-byte pages, for attachments",
        pageSize: 32_768, hmacAlgorithm: "HMAC_SHA1", kdfAlgorithm: "PBKDF2_HMAC_SHA1", kdfIterations: 64_000)

    /// SQLCipher 4's default format: 4096-byte pages, HMAC-SHA512, PBKDF2-HMAC-SHA512 with 256 000
    /// iterations. SQLCipher 3 cannot read it.
    public static let sqlcipher4Default = CipherFormat(
        name: "sqlcipher4-default", summary: "SQLCipher 4's default format", pageSize: 4096,
        hmacAlgorithm: "HMAC_SHA512", kdfAlgorithm: "PBKDF2_HMAC_SHA512", kdfIterations: 256_000)

    /// SQLCipher 3's default format (also SQLCipher 2's for raw keys): 1024-byte pages, HMAC-SHA1,
    /// PBKDF2-HMAC-SHA1 with 64 000 iterations.
    public static let sqlcipher3Default = CipherFormat(
        name: "sqlcipher3-default", summary: "SQLCipher 3's default format", pageSize: 1024,
        hmacAlgorithm: "HMAC_SHA1", kdfAlgorithm: "PBKDF2_HMAC_SHA1", kdfIterations: 64_000)

    init(
        name: String, summary: String, pageSize: Int, hmacAlgorithm: String, kdfAlgorithm: String,
        kdfIterations: Int
    ) {
        self.name = name
        self.summary = summary
        self.pageSize = pageSize
        self.hmacAlgorithm = hmacAlgorithm
        self.kdfAlgorithm = kdfAlgorithm
        self.kdfIterations = kdfIterations
    }

    /// The same algorithms with another page size, named after `base`.
    static func variant(of base: CipherFormat, pageSize: Int) -> CipherFormat {
        CipherFormat(
            name: "\(base.name)-\(pageSize)", summary: "\(base.summary), but with \(pageSize)-byte pages",
            pageSize: pageSize, hmacAlgorithm: base.hmacAlgorithm, kdfAlgorithm: base.kdfAlgorithm,
            kdfIterations: base.kdfIterations)
    }

    /// Whether this SQLCipher can read and write the format: SQLCipher 3 knows only HMAC-SHA1 and
    /// PBKDF2-HMAC-SHA1.
    func isSupported(by library: SQLCipherLibrary) -> Bool {
        library.major >= 4 || (hmacAlgorithm == "HMAC_SHA1" && kdfAlgorithm == "PBKDF2_HMAC_SHA1")
    }

    /// The pragmas that select this format on a keyed connection, for the schema `schema` (`main`, or an
    /// attached database), to run after the key and before the first read.
    ///
    /// SQLCipher 4 is told every setting. SQLCipher 3 is told the page size and iterations only: its HMAC and
    /// KDF are fixed to SHA-1, and it silently ignores pragmas it does not know.
    func pragmas(schema: String, library: SQLCipherLibrary) -> [String] {
        var pragmas: [String] = []
        if library.major >= 4 {
            pragmas.append("PRAGMA \(schema).cipher_hmac_algorithm = \(hmacAlgorithm)")
            pragmas.append("PRAGMA \(schema).cipher_kdf_algorithm = \(kdfAlgorithm)")
        }
        pragmas.append("PRAGMA \(schema).cipher_page_size = \(pageSize)")
        pragmas.append("PRAGMA \(schema).kdf_iter = \(kdfIterations)")
        return pragmas
    }

    /// The formats tried, read-only, when the pinned format does not open a file, to say which format the
    /// file is in instead of calling the key wrong. Formats this SQLCipher cannot read are left out; the caller
    /// leaves out the format it pinned.
    static func candidates(for library: SQLCipherLibrary) -> [CipherFormat] {
        var formats: [CipherFormat] = [.secureStore, .secureStoreAttachments, .sqlcipher4Default, .sqlcipher3Default]
        for size in [1024, 2048, 8192, 16384, 32768, 65536] {
            formats.append(.variant(of: .sqlcipher4Default, pageSize: size))
        }
        for size in [2048, 8192, 16384, 65536] {
            formats.append(.variant(of: .secureStore, pageSize: size))
        }
        return formats.filter { $0.isSupported(by: library) }
    }
}

/// The SQLCipher library this process uses, as it reports itself.
struct SQLCipherLibrary: Sendable, Equatable {
    /// `PRAGMA cipher_version`, e.g. "3.4.1" or "4.6.1 community".
    let version: String
    /// `sqlite_version()`, e.g. "3.15.2".
    let sqliteVersion: String

    /// The major version, 3 or 4.
    var major: Int { Int(version.prefix { $0.isNumber }) ?? 0 }

    /// The library as learned from the first keyed connection of the process.
    static let current = Mutex<SQLCipherLibrary?>(nil)

    /// SQLite's `SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`, from SQLite 3.16 (SQLCipher 4); SQLCipher 3.4's
    /// SQLite 3.15.2 does not have it.
    var hasNoCheckpointOnClose: Bool {
        let parts = sqliteVersion.split(separator: ".").compactMap { Int($0) }
        guard parts.count >= 2 else { return false }
        return parts[0] > 3 || (parts[0] == 3 && parts[1] >= 16)
    }
}

/// What an open database reports of its encryption: the format and the libraries in use.
public struct CipherInfo: Sendable, Hashable {
    /// The format the file is in: the one it was opened in (``DatabaseConfiguration/format``).
    public let format: CipherFormat
    /// The cipher SQLCipher reports (`PRAGMA cipher`), e.g. `AES-256-CBC`.
    public let cipher: String
    /// The page size in bytes SQLCipher reports (`PRAGMA cipher_page_size`).
    public let pageSize: Int
    /// The HMAC algorithm in use: read back from SQLCipher 4; SQLCipher 3 has only `HMAC_SHA1`.
    public let hmacAlgorithm: String
    /// The KDF algorithm in use: read back from SQLCipher 4; SQLCipher 3 has only `PBKDF2_HMAC_SHA1`.
    public let kdfAlgorithm: String
    /// The SQLCipher version (`PRAGMA cipher_version`).
    public let sqlcipherVersion: String
    /// The version of SQLite inside SQLCipher (`sqlite_version()`).
    public let sqliteVersion: String
}

/// What this module does with SQLCipher 4's own log, which by default writes a few lines to stderr for every
/// page that fails to authenticate (each failed open), and whose level is one setting for the whole process.
///
/// A library inside someone else's program should not write to its stderr: errors reach the caller as
/// ``DatabaseError`` values. So by default (``silenced``) the first connection of the process sets SQLCipher's
/// log level to `NONE`. A program that wants SQLCipher's log sets ``policy`` to ``leftAsIs`` before opening
/// its first database. SQLCipher 3 has no such log; nothing is done there.
public enum SQLCipherLogging: Sendable {
    /// SQLCipher's log level is set to `NONE` when the first connection of the process opens.
    case silenced
    /// SQLCipher's log settings are not touched.
    case leftAsIs

    private static let storage = Mutex<SQLCipherLogging>(.silenced)

    /// The policy for this process; read when the first connection opens. ``silenced`` by default.
    public static var policy: SQLCipherLogging {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
