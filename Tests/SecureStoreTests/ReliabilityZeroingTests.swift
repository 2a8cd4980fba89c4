// Key material in memory: the zeroing functions themselves, and what a key or secret shows when printed.
// Whether a released `Secret`/`DatabaseKey` buffer is zeroed cannot be observed without reading freed
// memory, so that part rests on review (Docs/security.md, "Secrets in memory"): every deinit and every
// temporary buffer calls the functions tested here.
@testable import EncryptedDatabase
import Foundation
@testable import Keychain
import SecureStoreCore
import Testing

@Suite struct ReliabilityZeroingTests {
    @Test func theCoresZeroingWipesEveryByteAndOnlyThose() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 96, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
        SecureStoreCore.secureZero(buffer.baseAddress! + 16, 64)
        #expect(buffer[0..<16].allSatisfy { $0 == 0xA5 })
        #expect(buffer[16..<80].allSatisfy { $0 == 0 })
        #expect(buffer[80..<96].allSatisfy { $0 == 0xA5 })
        SecureStoreCore.secureZero(nil, 8)  // tolerated
        SecureStoreCore.secureZero(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<16]))
        #expect(buffer[0..<16].allSatisfy { $0 == 0 })
    }

    @Test func hexEncodingNeverWritesPastItsOutputNorTraps() {
        let input: [UInt8] = [0x00, 0xAB, 0xFF]
        var exact = [UInt8](repeating: 0, count: 6)
        let encoded = input.withUnsafeBytes { bytes in exact.withUnsafeMutableBytes { writeHex(bytes, into: $0) } }
        #expect(encoded == 3)
        #expect(String(decoding: exact, as: UTF8.self) == "00abff")
        var short = [UInt8](repeating: 0x2E, count: 5)  // room for two bytes and a half
        let partial = input.withUnsafeBytes { bytes in short.withUnsafeMutableBytes { writeHex(bytes, into: $0) } }
        #expect(partial == 2)
        #expect(String(decoding: short, as: UTF8.self) == "00ab.")
        #expect(hexString([0x42, 0x01]) == "4201")
    }

    @Test func secureBytesHoldTheirBytesAndCompareByValue() {
        let a = SecureBytes([1, 2, 3, 4])
        let b = SecureBytes([1, 2, 3, 4])
        let c = SecureBytes([1, 2, 3, 5])
        #expect(a.withUnsafeBytes { Array($0) } == [1, 2, 3, 4])
        #expect(a.constantTimeEquals(b))
        #expect(!a.constantTimeEquals(c))
        #expect(!a.constantTimeEquals(SecureBytes([1, 2, 3])))
        #expect(SecureBytes([]).count == 0)
    }

    @Test func theRawKeyFormIsBuiltFromTheKeyAndNeverPrinted() throws {
        let key = try DatabaseKey(bytes: (0..<32).map { UInt8($0 * 7 & 0xff) })
        let hex = (0..<32).map { String(format: "%02x", $0 * 7 & 0xff) }.joined()
        let form = key.withRawKeyForm { String(decoding: $0, as: UTF8.self) }
        #expect(form == "x'\(hex)'")
        var dumped = ""
        dump(key, to: &dumped)
        for text in [String(describing: key), String(reflecting: key), "\(key)", dumped] {
            #expect(!text.contains(String(hex.prefix(8))), "\(text)")
        }
        let secret = Secret(string: "hunter2-secret-value")
        var dumpedSecret = ""
        dump(secret, to: &dumpedSecret)
        for text in [String(describing: secret), String(reflecting: secret), dumpedSecret] {
            #expect(!text.contains("hunter2"), "\(text)")
        }
    }
}
