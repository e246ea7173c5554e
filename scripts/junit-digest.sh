# junit-digest.sh: sourced by scripts/test.sh and scripts/stall-hunt.sh.
#
# XML's five escapes undone (an awk function, for the two readers below).
JUNIT_UNESCAPE='
    function unescape(t) {
      gsub(/&lt;/, "<", t); gsub(/&gt;/, ">", t); gsub(/&quot;/, "\"", t); gsub(/&apos;/, "\047", t)
      gsub(/&amp;/, "\\&", t); return t
    }'

# junit_failed_names FILE...: the name of every failed test in ctest junit FILEs, a line each.
junit_failed_names() {
  awk "$JUNIT_UNESCAPE"'
    /<testcase / && /status="fail"/ { name = $0; sub(/.*<testcase name="/, "", name); sub(/".*/, "", name); print unescape(name) }
  ' "$@"
}

# junit_failures FILE: each failed or skipped test of a ctest junit FILE, with an excerpt of its
# output: from its first sanitizer report (ASan, UBSan, TSan, LSan) or else its last lines. Only
# the first three failures get an excerpt, so the digest and the summary stay at the end of a log
# whose tail is all a CI page may show.
junit_failures() {
  awk -v max_excerpts=3 -v lines=30 "$JUNIT_UNESCAPE"'
    function flush(   i, from, n) {
      if (name == "" || status == "run") return
      print "  " (status == "fail" ? "FAILED " : "SKIPPED") "  " name
      if (status != "fail" || ++shown > max_excerpts) return
      from = (report > 0) ? report : (nout > lines ? nout - lines + 1 : 1)
      n = 0
      for (i = from; i <= nout && n < lines; i++) { print "    | " out[i]; n++ }
      if (i <= nout) print "    | ... (" (nout - i + 1) " more lines)"
    }
    /<testcase / {
      flush(); name = $0; sub(/.*<testcase name="/, "", name); sub(/".*/, "", name); name = unescape(name)
      status = $0; sub(/.*status="/, "", status); sub(/".*/, "", status)
      nout = 0; report = 0; inout = 0
    }
    /<system-out>/ { inout = 1; sub(/.*<system-out>/, "") }
    inout {
      done = sub(/<\/system-out>.*/, "")
      if (!(done && $0 == "")) {
        out[++nout] = unescape($0)
        if (report == 0 && out[nout] ~ /(ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error:)/) report = nout
      }
      if (done) inout = 0
    }
    END { flush() }
  ' "$1"
}
