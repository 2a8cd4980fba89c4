// swift-tools-version: 6.0
// SecureStore: secrets in the Secret Service, records in SQLCipher, settings in size-limited preferences.
// No Swift package dependencies: the toolchain plus Debian's libsecret-1-dev and libsqlcipher-dev.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SecureStore",
    products: [
        .library(name: "Keychain", targets: ["Keychain"]),
        .library(name: "EncryptedDatabase", targets: ["EncryptedDatabase"]),
        .library(name: "Preferences", targets: ["Preferences"]),
        .library(name: "Attachments", targets: ["Attachments"]),
        .library(name: "SecureStore", targets: ["SecureStore"]),
        .library(name: "PreferenceSecrets", targets: ["PreferenceSecrets"]),
        .library(name: "Tasks", targets: ["Tasks"]),
        .library(name: "Sync", targets: ["Sync"]),
        .executable(name: "securestore", targets: ["SecureStoreTool"]),
    ],
    targets: [
        // C libraries: a module map and a shim header each, nothing else.
        .systemLibrary(
            name: "CLibSecret",
            pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev"])]
        ),
        // libcrypto (OpenSSL), which SQLCipher itself links: SHA-256 digests of attachments through its EVP API.
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The kernel keyring's add_key(2)/keyctl(2) (variadic syscall(2) in C): the key file's session cache. No library.
        .systemLibrary(name: "CLinuxKeyring"),
        .systemLibrary(
            name: "CSQLCipher",
            pkgConfig: "sqlcipher",
            providers: [.apt(["libsqlcipher-dev"])]
        ),
        // The internal core: system calls, the zeroing byte buffer, hex, terminal text, base directories, dates
        // as microseconds. No C library of its own, `package` access only, not a product.
        .target(name: "SecureStoreCore", swiftSettings: swiftSettings),

        // Modules.
        .target(
            name: "Keychain", dependencies: ["CLibSecret", "CLibCrypto", "CLinuxKeyring", "SecureStoreCore"],
            swiftSettings: swiftSettings),
        .target(
            name: "EncryptedDatabase", dependencies: ["CSQLCipher", "SecureStoreCore"], swiftSettings: swiftSettings),
        .target(name: "Preferences", dependencies: ["SecureStoreCore"], swiftSettings: swiftSettings),
        // Encrypted attachments of any record (Docs/attachments.md): a second SQLCipher file of chunks, SHA-256 from
        // libcrypto. It also declares SecureStoreError, which it throws and SecureStore re-exports.
        .target(
            name: "Attachments", dependencies: ["EncryptedDatabase", "SecureStoreCore", "CLibCrypto"],
            swiftSettings: swiftSettings),
        .target(
            name: "SecureStore",
            dependencies: ["Attachments", "Keychain", "EncryptedDatabase", "SecureStoreCore"],
            swiftSettings: swiftSettings
        ),
        // Moving a secret out of preferences into the keychain: the one place where Preferences and Keychain
        // meet, kept out of SecureStore so that a program with a keyed database does not link Preferences.
        .target(
            name: "PreferenceSecrets", dependencies: ["SecureStore", "Keychain", "Preferences"],
            swiftSettings: swiftSettings),
        // The task list: one application of the keyed database, in a module of its own.
        .target(
            name: "Tasks", dependencies: ["SecureStore", "EncryptedDatabase", "SecureStoreCore"],
            swiftSettings: swiftSettings),
        // End-to-end-encrypted sync of a keyed database's tables through git or a replicated folder (Docs/sync.md).
        .target(
            name: "Sync",
            dependencies: ["SecureStore", "EncryptedDatabase", "Keychain", "SecureStoreCore", "CLibCrypto"],
            swiftSettings: swiftSettings),
        // The tool: its command tree, parser and commands in a library that tests and the fuzzer import, and a
        // thin executable (the product keeps the name `securestore`; no target differs from a module by case).
        .target(
            name: "SecureStoreCommands",
            dependencies: [
                "SecureStore", "PreferenceSecrets", "Tasks", "Sync", "Keychain", "EncryptedDatabase", "Preferences",
                "SecureStoreCore",
            ],
            swiftSettings: swiftSettings
        ),
        // The systemd user unit `make install` fills in and installs (Docs/sync.md, "Syncing by itself").
        .executableTarget(
            name: "SecureStoreTool", dependencies: ["SecureStoreCommands"], exclude: ["securestore-sync-watch@.service.in"],
            swiftSettings: swiftSettings),
        // Tests: one target per module, plus end-to-end tests of the built tool, and the helpers they share
        // (the keyring harness, running processes, temporary directories).
        .target(name: "TestSupport", dependencies: ["Keychain", "EncryptedDatabase", "Preferences", "Attachments", "Sync"], path: "Tests/TestSupport", swiftSettings: swiftSettings),
        .testTarget(name: "KeychainTests", dependencies: ["Keychain", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "EncryptedDatabaseTests",
            dependencies: ["EncryptedDatabase", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "PreferencesTests", dependencies: ["Preferences", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "TasksTests", dependencies: ["Tasks", "SecureStore", "EncryptedDatabase", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "AttachmentsTests", dependencies: ["Attachments", "EncryptedDatabase", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SecureStoreTests", dependencies: ["SecureStore", "SecureStoreCore", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "PreferenceSecretsTests",
            dependencies: ["PreferenceSecrets", "SecureStore", "Keychain", "Preferences", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SyncTests", dependencies: ["Sync", "Tasks", "SecureStore", "EncryptedDatabase", "Keychain", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "CLITests", dependencies: ["SecureStoreTool", "SecureStoreCommands", "TestSupport"],
            swiftSettings: swiftSettings),
    ]
)
