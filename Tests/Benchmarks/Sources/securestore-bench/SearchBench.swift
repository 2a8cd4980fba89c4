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
