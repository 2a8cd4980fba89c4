import Foundation
import TestSupport
import Testing

/// The benchmark package (`Tests/Benchmarks`, built by `make build-tests` beside the suite) and its debug build,
/// with each of `executables` in it: one that is not built is one issue that ends the test.
private func benchmarkBuild(
    _ executables: [String], sourceLocation: SourceLocation = #_sourceLocation
) throws -> (package: String, binaries: String) {
    let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Benchmarks").path
    let binaries = package + "/.build/debug"
    for name in executables {
        try #require(
            FileManager.default.isExecutableFile(atPath: binaries + "/" + name),
            "\(name) is not built: swift build --package-path Tests/Benchmarks", sourceLocation: sourceLocation)
    }
    return (package, binaries)
}

/// `make bench` at a tiny size: the driver, both benchmark executables and the joined output keep working.
/// (The real figures come from a release build: Docs/performance.md.)
@Suite(.enabled(if: Harness.hasSecretService, "the benchmarks measure the tool against the Secret Service")) struct BenchSmokeTests {
    static let workloads = [
        "open", "insert", "bulk", "fetch", "count", "toggle", "launch", "keychain-get", "keychain-set",
        "prefs-load", "prefs-save", "export", "list-json", "import",
        "records-fetch", "records-fetch-grdb", "records-insert", "records-insert-grdb",
        // Against C on SQLCipher (CBaselineBench.swift).
        "insert-c", "fetch-c", "toggle-c", "records-fetch-c", "records-insert-c",
    ]

    @Test func theBenchDriverPrintsOneBenchLinePerWorkloadWithARatio() throws {
        let (package, binaries) = try benchmarkBuild(["securestore-bench", "securestore-bench-baseline", "securestore-bench-grdb"])
        let result = try run([package + "/run-bench.sh", "--bin", binaries, "--scale", "1000", "--runs", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").filter { $0.hasPrefix("BENCH ") }
        for workload in Self.workloads {
            let line = lines.first { $0.hasPrefix("BENCH \(workload) ") }
            #expect(line != nil, "no BENCH line for \(workload):\n\(result.stdout)")
            if let line {
                #expect(line.contains(" project=") && line.contains(" baseline=") && line.contains(" ratio="), "\(line)")
                #expect(!line.contains("nan") && !line.contains("ratio=0.0000"), "\(line)")
            }
        }
        #expect(lines.count == Self.workloads.count, "\(lines.joined(separator: "\n"))")
        #expect(lines.first { $0.hasPrefix("BENCH launch ") }?.contains(" rss=") == true)
        #expect(result.stdout.contains("| workload | project"))
    }

    /// The attachment benchmark's driver at a tiny size (two sizes, one round, ~200 KB per round), warm and cold:
    /// one ATTACH line per size and operation, with every side's throughput and both ratios.
    @Test(arguments: [false, true]) func theAttachmentBenchDriverPrintsOneLinePerSizeAndOperation(cold: Bool) throws {
        let (package, binaries) = try benchmarkBuild(["securestore-bench-attachments", "securestore-bench-attachments-baseline"])
        let result = try run(
            [package + "/run-attachment-bench.sh", "--bin", binaries, "--pairs", "1", "--sizes", "4000 300000", "--total", "200000"]
                + (cold ? ["--cold"] : []))
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").filter { $0.hasPrefix("ATTACH ") }
        for operation in ["write", "read"] {
            for size in ["4000", "300000"] {
                let line = lines.first { $0.hasPrefix("ATTACH \(operation) \(size) ") }
                #expect(line != nil, "no ATTACH line for \(operation) \(size):\n\(result.stdout)")
                if let line {
                    for field in ["securestore=", "file=", "sqlite=", "inline=", "vs_file=", "vs_sqlite=", "rss="] {
                        #expect(line.contains(" " + field), "\(line)")
                    }
                    #expect(line.hasSuffix(cold ? " reads=cold" : " reads=warm"), "\(line)")
                    #expect(!line.contains("nan") && !line.contains("inf") && !line.contains("vs_file=0.000"), "\(line)")
                }
            }
        }
        #expect(lines.count == 4, "\(lines.joined(separator: "\n"))")
        #expect(result.stdout.contains("| operation | size | securestore MB/s"))
    }

    /// The ceiling driver (a warm store read beside a cold plain-file read, Docs/attachments.md "Targets") at a tiny
    /// size: one table row per size with both throughputs and their ratio.
    @Test func theAttachmentCeilingDriverPrintsOneRowPerSizeWithARatio() throws {
        let (package, binaries) = try benchmarkBuild(["securestore-bench-attachments"])
        let result = try run([package + "/run-attachment-ceiling.sh", "--bin", binaries, "--pairs", "1", "--sizes", "4000 300000", "--total", "200000"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("| size | securestore warm MB/s | plain file cold MB/s | warm store / cold file"))
        for size in ["4000", "300000"] {
            let row = result.stdout.split(separator: "\n").first { $0.hasPrefix("| \(size) | ") }
            #expect(row != nil, "no row for \(size):\n\(result.stdout)")
            if let row {
                let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
                #expect(cells.count == 4 && cells.dropFirst().allSatisfy { (Double($0) ?? 0) > 0 }, "\(row)")
            }
        }
    }
}
