<?php
// What every PHP worker of record.sh logs by (as truth_log.js for the node workers): one
// JSON line per event to stdout, stamped with the wall clock (µs) when it is written and
// with the process's name, the global $proc.

function now_us(): int
{
    $t = gettimeofday();
    return $t['sec'] * 1000000 + $t['usec'];
}

function log_event(array $o): void
{
    global $proc;
    $line = array_merge(['t_us' => now_us(), 'proc' => $proc], $o);
    fwrite(STDOUT, json_encode($line, JSON_UNESCAPED_SLASHES) . "\n");
    fflush(STDOUT);
}
