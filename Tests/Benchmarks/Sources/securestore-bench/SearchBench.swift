// securestore-bench search DIRECTORY [--scale N] [--runs N]: the task list's word search (the full-text index,
// `tasks list --search`) against the LIKE scan it replaced (`titleContains`), on one store of 1M tasks (the bulk
// data set), in interleaved pairs (the first side alternates), each side answering what `tasks list` shows: the
// first page of 50 newest matches and their total. Reports the median of each side and of the per-pair ratios
// fts/like (Docs/performance.md, "Search"):
//
//   SEARCH <workload> pairs=N like=<median>ms fts=<median>ms ratio=<median fts/like> ratio-min=… ratio-max=…
//
// Workloads:
//   search-rare    "12345": 11 tasks ("#12345", "#123450"…"#123459"); both sides must find the same tasks.
//   search-common  "pay": 100 000 tasks (every tenth title begins with "Pay"); the page and the count.
import BenchSupport
import EncryptedDatabase
import Foundation
import Tasks

struct SearchBench {
    let directory: String
    let options: BenchOptions

    func run() throws {
        let workloads = [("search-rare", "12345", "#12345"), ("search-common", "pay", "Pay ")]
        guard workloads.contains(where: { options.wants($0.0) }) else { return }
        let path = directory + "/search.db"
        let count = options.bulkCount
        let seed = try ProjectBench(directory: directory, options: options).makeStore(path, count: count)
        info("search-seed", seed, "\(count) tasks inserted with the search index, one transaction")
        let queue = try DatabaseQueue(path: path, key: benchKey())
        defer {
            try? queue.close()
            removeDatabase(path)
        }
        let tasks = try TaskList(queue: queue)
        for (workload, words, substring) in workloads where options.wants(workload) {
            let like = TaskList.Filter(titleContains: substring)
            let fts = TaskList.Filter(titleMatches: words)
            let (expected, found) = (try tasks.page(like, limit: 50), try tasks.page(fts, limit: 50))
            guard expected == found else {
                fail("\(workload): the word search found \(found.total) tasks, the LIKE scan \(expected.total)")
            }
            var likeSamples: [Double] = []
            var ftsSamples: [Double] = []
            var ratios: [Double] = []
            for pair in 0..<max(2, options.runs * 2) {
                var sides = [(like, true), (fts, false)]
                if pair % 2 == 1 { sides.reverse() }
                var times: (like: Double, fts: Double) = (0, 0)
                for (filter, isLike) in sides {
                    let time = try milliseconds { _ = try tasks.page(filter, limit: 50) }
                    if isLike { times.like = time } else { times.fts = time }
                }
                likeSamples.append(times.like)
                ftsSamples.append(times.fts)
                ratios.append(times.fts / times.like)
            }
            print(
                "SEARCH \(workload) pairs=\(ratios.count) matches=\(found.total) like=\(format(median(likeSamples)))ms "
                    + "fts=\(format(median(ftsSamples)))ms ratio=\(format(median(ratios))) "
                    + "ratio-min=\(format(ratios.min() ?? 0)) ratio-max=\(format(ratios.max() ?? 0))")
        }
    }

    private func format(_ value: Double) -> String { String(format: "%.4f", value) }
}

/// `securestore-bench search-child DB WORDS RUNS [--scale N]`: one process of the task list's word search on the
/// store at DB (made with the bulk data set when missing, and kept for the next process), for A/B pairs of two
/// builds on the same file. Each run times, on one warm connection, what `tasks list --search WORDS` does:
///
///   SEARCHCHILD words=W matches=N page=<median>ms first=<median>ms list=<median>ms all=<median>ms
///
/// `page`: the first page of 50 newest matches and their total (``TaskList/page(_:order:after:offset:limit:)``);
/// `first`: until the first task of that page is handed over by ``TaskList/Snapshot/forEachTask(_:order:offset:limit:_:)``
/// (the time to the first printed line); `list`: the 50 tasks without the total; `all`: every match, streamed
/// (`--limit none`), run once per process.
func searchChild(_ path: String, _ words: String, _ runs: Int, options: BenchOptions) throws {
    if !FileManager.default.fileExists(atPath: path) {
        let seed = try ProjectBench(directory: (path as NSString).deletingLastPathComponent, options: options)
            .makeStore(path, count: options.bulkCount)
        info("search-seed", seed, "\(options.bulkCount) tasks inserted with the search index, one transaction")
    }
    let queue = try DatabaseQueue(path: path, key: benchKey())
    defer { try? queue.close() }
    let tasks = try TaskList(queue: queue)
    let filter = TaskList.Filter(titleMatches: words)
    let total = try tasks.page(filter, limit: 50).total  // warm-up
    var page: [Double] = [], first: [Double] = [], list: [Double] = []
    for _ in 0..<max(1, runs) {
        page.append(try milliseconds { _ = try tasks.page(filter, limit: 50) })
        list.append(try milliseconds { _ = try tasks.list(filter, limit: 50) })
        let start = ContinuousClock.now
        var firstTime: Double?
        _ = try tasks.snapshot { snapshot in
            try snapshot.forEachTask(filter, limit: 50) { _ in
                if firstTime == nil {
                    let elapsed = ContinuousClock.now - start
                    firstTime = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3
                }
            }
        }
        first.append(firstTime ?? 0)
    }
    var streamed = 0
    let all = try milliseconds {
        _ = try tasks.snapshot { snapshot in try snapshot.forEachTask(filter) { _ in streamed += 1 } }
    }
    guard streamed == total else { fail("search-child: streamed \(streamed) tasks, the total says \(total)") }
    func format(_ value: Double) -> String { String(format: "%.3f", value) }
    print(
        "SEARCHCHILD words=\(words) matches=\(total) page=\(format(median(page)))ms first=\(format(median(first)))ms "
            + "list=\(format(median(list)))ms all=\(format(all))ms")
}
