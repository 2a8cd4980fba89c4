// The Keychain module's zeroing function (kept apart from ReliabilityZeroingTests, which imports the core
// module: both name a `secureZero`).
import Foundation
@testable import Keychain
import Testing

@Suite struct ReliabilityKeychainZeroingTests {
    @Test func theKeychainModulesZeroingWipesEveryByteAndOnlyThose() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 96, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0x5A)
        secureZero(UnsafeMutableRawBufferPointer(rebasing: buffer[8..<88]))
        #expect(buffer[0..<8].allSatisfy { $0 == 0x5A })
        #expect(buffer[8..<88].allSatisfy { $0 == 0 })
        #expect(buffer[88..<96].allSatisfy { $0 == 0x5A })
        secureZero(UnsafeMutableRawBufferPointer(start: nil, count: 0))  // tolerated
    }
}
