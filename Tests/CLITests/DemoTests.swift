import Foundation
import TestSupport
import Testing

/// `make demo`, the README's main job, runs to its end with the built tool (it broke once unnoticed when `--json`
/// lists became one task per line): every step's command succeeds and no title is found in plain.
@Suite(.serialized) struct DemoTests {
    @Test(.enabled(if: Harness.isGnomeKeyring, "the demo runs in a gnome-keyring harness of its own"))
    func theDemoRunsToItsEnd() throws {
        try Harness.require()
        let harness = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Harness").path
        // In a keyring and folders of its own, as `make demo` runs it: the default app's items, nobody else's.
        let result = try run([harness + "/with-keyring", harness + "/demo", product("securestore")])
        #expect(result.status == 0, "\(result.stdout.suffix(2000)) \(result.stderr.suffix(2000))")
        #expect(result.stdout.contains("read back byte for byte: yes"))
        #expect(result.stdout.contains("0 files contain the title"))
        #expect(result.stdout.contains("0 files of the shared folder contain the title"))
        #expect(result.stdout.contains("store: file (the key file"))
        #expect(!result.stdout.contains("FOUND PLAINTEXT"))
        #expect(result.stdout.hasSuffix("Done. Everything above lived in a throw-away keyring and directories, now removed.\n"))
    }
}
