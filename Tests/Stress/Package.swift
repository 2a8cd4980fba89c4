// swift-tools-version: 6.0
// The stress helper the crash, concurrency, cross-version and soak tests run as a separate process (kill -9 at
// random moments, several writers at once). A package of its own, so that the product's manifest holds only
// the product; it depends on the product by path. `make build-tests` builds it beside the suite.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "SecureStoreStress",
    dependencies: [.package(name: "SecureStore", path: "../..")],
    targets: [
        .executableTarget(
            name: "securestore-stress",
            dependencies: [
                .product(name: "SecureStore", package: "SecureStore"),
                .product(name: "Tasks", package: "SecureStore"),
                .product(name: "Keychain", package: "SecureStore"),
                .product(name: "EncryptedDatabase", package: "SecureStore"),
                .product(name: "Preferences", package: "SecureStore"),
                .product(name: "Sync", package: "SecureStore"),
            ],
            swiftSettings: swiftSettings
        )
    ]
)
