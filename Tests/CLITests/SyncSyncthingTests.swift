import Foundation
import TestSupport
import Testing

private let syncthingPath = "/usr/bin/syncthing"

/// Two real Syncthing instances, each with its own home and folder, talking only to each other on 127.0.0.1.
private final class SyncthingPair {
    let root: String
    private var processes: [ChildProcess] = []

    init(root: String) throws {
        self.root = root
        let ports = try run([
            "python3", "-c",
            "import socket\ns=[socket.socket() for _ in range(2)]\n[x.bind(('127.0.0.1',0)) for x in s]\nprint(' '.join(str(x.getsockname()[1]) for x in s))",
        ]).stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        try #require(ports.count == 2)
        var ids: [String] = []
        for index in 0..<2 {
            let generated = try run([syncthingPath, "generate", "--home=\(home(index))", "--no-default-folder", "--skip-port-probing"])
            try #require(generated.status == 0, "\(generated.stderr)")
            try FileManager.default.createDirectory(atPath: folder(index) + "/.stfolder", withIntermediateDirectories: true)
            ids.append(try run([syncthingPath, "serve", "--home=\(home(index))", "--device-id"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        // The whole configuration, written before the first start: listening and the GUI on 127.0.0.1 only (the GUI
        // off), the peer at a static address; global and local discovery, relays, NAT traversal, usage reporting,
        // crash reporting and upgrade checks off.
        for index in 0..<2 {
            let config = """
                <configuration version="36">
                    <folder id="securestore" label="securestore" path="\(folder(index))" type="sendreceive" rescanIntervalS="3600" fsWatcherEnabled="true" fsWatcherDelayS="1">
                        <device id="\(ids[0])"></device>
                        <device id="\(ids[1])"></device>
                    </folder>
                    <device id="\(ids[0])" name="first"><address>tcp://127.0.0.1:\(ports[0])</address></device>
                    <device id="\(ids[1])" name="second"><address>tcp://127.0.0.1:\(ports[1])</address></device>
                    <gui enabled="false" tls="false"><address>127.0.0.1:0</address></gui>
                    <options>
                        <listenAddress>tcp://127.0.0.1:\(ports[index])</listenAddress>
                        <globalAnnounceEnabled>false</globalAnnounceEnabled>
                        <localAnnounceEnabled>false</localAnnounceEnabled>
                        <relaysEnabled>false</relaysEnabled>
                        <natEnabled>false</natEnabled>
                        <urAccepted>-1</urAccepted>
                        <crashReportingEnabled>false</crashReportingEnabled>
                        <autoUpgradeIntervalH>0</autoUpgradeIntervalH>
                        <startBrowser>false</startBrowser>
                    </options>
                </configuration>
                """
            try config.write(toFile: home(index) + "/config.xml", atomically: true, encoding: .utf8)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["STNOUPGRADE"] = "1"
        environment["STNODEFAULTFOLDER"] = "1"
        for index in 0..<2 {
            processes.append(
                try ChildProcess(
                    [syncthingPath, "serve", "--home=\(home(index))", "--no-browser", "--no-restart", "--logfile=\(root)/log\(index)"],
                    environment: environment))
        }
    }

    func home(_ index: Int) -> String { root + "/home\(index)" }
    func folder(_ index: Int) -> String { root + "/folder\(index)" }

    deinit {
        for process in processes { process.kill(SIGTERM) }
        for process in processes { _ = process.wait() }
    }
}

/// Waits (up to a minute: the engine's delay is not ours) until `condition` holds.
private func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
    for _ in 0..<300 {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.2)
    }
    return false
}

/// `sync --folder` through real Syncthing (Debian's `syncthing`), as a person would set it up.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: syncthingPath), "syncthing is not installed (apt-get install syncthing)"))
struct SyncSyncthingTests {
    /// Two devices whose folders Syncthing replicates: the first device's tasks reach the second, the second's edits
    /// come back, a title and a done mark made on either side are both kept, no Syncthing conflict copy is ever made
    /// (each file has one writer), and nothing readable is in either folder.
    @Test func twoDevicesThroughSyncthing() throws {
        try Harness.require()
        let work = try TemporaryDirectory()
        let pair = try SyncthingPair(root: work.path)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let id = try #require(
            (try JSONSerialization.jsonObject(with: Data(try a.ok(["--json", "tasks", "add", "Water", "the", "plants"]).stdout.utf8))
                as? [String: Any])?["id"] as? String)
        let code = try a.ok(["sync", "init", "--folder", pair.folder(0)]).stdout.trimmingCharacters(in: .newlines)
        let deviceA = try a.deviceID()
        func bundles(_ folder: String, _ device: String) -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: folder + "/devices/" + device)) ?? [])
                .filter { $0.utf8.count == 75 && !$0.hasPrefix(".") }.count
        }
        #expect(eventually { FileManager.default.fileExists(atPath: pair.folder(1) + "/key-check") && bundles(pair.folder(1), deviceA) == 1 })
        try b.ok(["sync", "join", "--folder", pair.folder(1)], input: code + "\n")
        #expect(try b.tasks().map { $0["title"] } == ["Water the plants"])
        let deviceB = try b.deviceID()

        try a.ok(["tasks", "rename", id, "Water", "the", "tomatoes"])
        try b.ok(["tasks", "done", id])
        try b.ok(["tasks", "add", "Call", "the", "plumber"])
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        #expect(eventually { bundles(pair.folder(0), deviceB) == 2 && bundles(pair.folder(1), deviceA) == 2 })
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        let expected = try a.tasks()
        #expect(expected.count == 2)
        #expect(expected.contains { $0["title"] == "Water the tomatoes" && $0["done"] == "1" })
        #expect(try b.tasks() == expected)

        for index in 0..<2 {
            let names = FileManager.default.enumerator(atPath: pair.folder(index))?.allObjects as? [String] ?? []
            #expect(!names.contains { $0.contains("sync-conflict") }, "\(names)")
            for needle in ["Water", "plants", "tomatoes", "plumber", code] {
                #expect(filesContaining(needle, under: pair.folder(index)).isEmpty, "'\(needle.prefix(8))' readable")
            }
        }
    }
}
