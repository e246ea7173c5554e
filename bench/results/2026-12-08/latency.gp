set terminal pngcairo size 1400,900 font ',10'
set output 'latency.png'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set ylabel 'latency, µs (log)'
set grid ytics
set key top left
set xtics rotate by -20
set datafile missing 'NaN'
set multiplot layout 2,2 title 'Echo latency percentiles at 1 call in flight (perftest: round trip = 2 × one-way; no p90 from perftest)'
set title '64 B'
plot 'latency.dat' index 0 using 2:xtic(1) title 'p50', '' index 0 using 3 title 'p90', '' index 0 using 4 title 'p99', '' index 0 using 5 title 'p99.9'
set title '4 KiB'
plot 'latency.dat' index 1 using 2:xtic(1) title 'p50', '' index 1 using 3 title 'p90', '' index 1 using 4 title 'p99', '' index 1 using 5 title 'p99.9'
set title '64 KiB'
plot 'latency.dat' index 2 using 2:xtic(1) title 'p50', '' index 2 using 3 title 'p90', '' index 2 using 4 title 'p99', '' index 2 using 5 title 'p99.9'
set title '1 MiB'
plot 'latency.dat' index 3 using 2:xtic(1) title 'p50', '' index 3 using 3 title 'p90', '' index 3 using 4 title 'p99', '' index 3 using 5 title 'p99.9'
unset multiplot
