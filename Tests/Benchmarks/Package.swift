// swift-tools-version: 6.0
// SecureStore's benchmarks (`make bench`, Docs/performance.md), in a package of their own so that the
// product's manifest holds only the product. The project side depends on the product by path, as an app
// would; the baseline links plain libsqlite3 and libsecret's C API in an executable of its own, because plain
// libsqlite3 must never share a process with SQLCipher. Not installed.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SecureStoreBenchmarks",
    dependencies: [
        .package(name: "SecureStore", path: "../.."),
        // The peer the records layer is measured against (issue 14): a dependency of this benchmark package only,
        // never of the product. It links the system's plain libsqlite3, so it runs in an executable of its own.
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .systemLibrary(name: "CSQLite3", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLibSecretBaseline", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        // Timing, statistics, process spawning and the shared data set; links no database library.
        .target(name: "BenchSupport", swiftSettings: swiftSettings),
        .executableTarget(
            name: "securestore-bench",
            dependencies: [
                .product(name: "SecureStore", package: "SecureStore"),
                .product(name: "Tasks", package: "SecureStore"),
                .product(name: "Keychain", package: "SecureStore"),
                .product(name: "EncryptedDatabase", package: "SecureStore"),
                .product(name: "Preferences", package: "SecureStore"),
                "BenchSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // One change end to end through a folder, in one process: the sync engine's own time (issue 26; Docs/performance.md).
        .executableTarget(
            name: "securestore-bench-sync",
            dependencies: [
                .product(name: "SecureStore", package: "SecureStore"),
                .product(name: "Tasks", package: "SecureStore"),
                .product(name: "Keychain", package: "SecureStore"),
                .product(name: "Sync", package: "SecureStore"),
                "BenchSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // including(all:) against the hand-written two-query version (issue 25; Docs/records.md).
        .executableTarget(
            name: "securestore-bench-associations",
            dependencies: [.product(name: "EncryptedDatabase", package: "SecureStore")],
            swiftSettings: swiftSettings
        ),
        // GRDB 7.10's Codable records on the records workloads' data (plain SQLite: no SQLCipher in this process).
        .executableTarget(
            name: "securestore-bench-grdb",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift"), "BenchSupport"],
            swiftSettings: swiftSettings
        ),
        // Attachments (Docs/attachments.md): the project side (AttachmentStore, a BLOB inside the SQLCipher
        // database, plain files) and the plain-SQLite BLOB column, driven interleaved by run-attachment-bench.sh.
        .executableTarget(
            name: "securestore-bench-attachments",
            dependencies: [
                .product(name: "SecureStore", package: "SecureStore"),
                .product(name: "EncryptedDatabase", package: "SecureStore"),
                "BenchSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // The task list's launch and fetch with and without 1 GB of attachments stored.
        .executableTarget(
            name: "securestore-bench-attachments-tasks",
            dependencies: [
                .product(name: "SecureStore", package: "SecureStore"),
                .product(name: "Tasks", package: "SecureStore"),
                .product(name: "EncryptedDatabase", package: "SecureStore"),
                "BenchSupport",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "securestore-bench-attachments-baseline",
            dependencies: ["CSQLite3", "BenchSupport"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "securestore-bench-baseline",
            dependencies: ["CSQLite3", "CLibSecretBaseline", "BenchSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
