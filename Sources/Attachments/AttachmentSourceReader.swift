internal import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// Reads a source into chunk buffers and notices a file that changes under it.
struct SourceReader {
    private var descriptor: Int32
    private let ownsDescriptor: Bool
    private let label: String
    private var memory: Data?
    private var memoryOffset = 0
    private var initial: stat?
    /// The size of a regular file when reading began.
    let expectedSize: Int64?

    init(_ source: AttachmentSource) throws {
        label = source.label
        switch source.origin {
        case .data(let data):
            descriptor = -1
            ownsDescriptor = false
            memory = data
            expectedSize = Int64(data.count)
        case .descriptor(let fd):
            descriptor = fd
            ownsDescriptor = false
            if let status = try? FileDescriptor(rawValue: fd).fileStatus(), status.isRegularFile {
                initial = status.raw
                // Standard input redirected from a file is read from its current offset.
                let offset = (try? FileDescriptor(rawValue: fd).currentOffset()) ?? 0
                expectedSize = Int64(status.size) - Int64(max(0, offset))
            } else {
                expectedSize = nil
            }
        case .path(let path):
            ownsDescriptor = true
            do {
                switch try FileDescriptor.openRegularFile(path, followingLinks: true) {
                case .opened(let fd, let status):
                    descriptor = fd.rawValue
                    initial = status
                    expectedSize = Int64(status.st_size)
                case .missing:
                    throw SecureStoreError(SecureStoreError.Code.notFound, "'\(path)' does not exist; nothing was attached")
                case .notRegular:
                    throw SecureStoreError(
                        SecureStoreError.Code.invalidArgument,
                        "'\(path)' is not a regular file; to attach a stream, pipe it to standard input with a name")
                }
            } catch let error as Errno {
                throw SecureStoreError(
                    error.isPermission ? SecureStoreError.Code.fileSystem : SecureStoreError.Code.fileSystem,
                    "cannot open '\(path)': \(error); nothing was attached")
            }
        }
    }

    mutating func close() {
        if ownsDescriptor, descriptor >= 0 { FileDescriptor(rawValue: descriptor).close() }
        descriptor = -1
    }

    /// Fills `buffer` as far as the source goes; returns the byte count (less than the buffer only at the end).
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if let memory {
            let count = min(buffer.count, memory.count - memoryOffset)
            memory.copyBytes(to: buffer.bindMemory(to: UInt8.self), from: memoryOffset..<(memoryOffset + count))
            memoryOffset += count
            return count
        }
        var filled = 0
        while filled < buffer.count {
            let result: Int
            do {
                result = try FileDescriptor(rawValue: descriptor).readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            } catch {
                throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot read \(label): \(error); nothing was attached")
            }
            if result == 0 { break }
            filled += result
        }
        return filled
    }

    /// Checks, at the end, that a regular file was not changed, truncated or deleted while it was read.
    func checkUnchanged(bytesRead: Int64) throws {
        guard let initial, descriptor >= 0 else { return }
        guard let now = try? FileDescriptor(rawValue: descriptor).status() else { return }
        let expected = expectedSize ?? Int64(initial.st_size)
        if bytesRead < expected {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "\(label) shrank while it was being read (\(expected) bytes at the start, \(bytesRead) read); nothing was attached")
        }
        if now.st_size != initial.st_size || now.st_mtim.tv_sec != initial.st_mtim.tv_sec
            || now.st_mtim.tv_nsec != initial.st_mtim.tv_nsec || bytesRead != expected
        {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "\(label) changed while it was being read; nothing was attached. Attach it again when it is complete")
        }
        if now.st_nlink == 0 {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "\(label) was deleted while it was being read; nothing was attached")
        }
    }
}
