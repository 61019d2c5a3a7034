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

// A worker's parent: runs rounds FROM.. of the loop in a child (this file again, with
// `--life FROM KILL`), passing its lines on, until the child asks to be killed mid-hold
// (`{"event": "kill_me", "round": N, ...}`, in round `$kill`): SIGKILL 20-300 ms later, so
// nothing is released, `$expire($request)` logs what runs out its lease, and a new child
// takes the rounds after N. `$first_arg` is the child's first argument (the port or ports).
function run_rounds_in_children(string $first_arg, int $rounds, int $kill, callable $expire): void
{
    global $proc;
    $from = 0;
    while ($from < $rounds) {
        $cmd = [PHP_BINARY, $_SERVER['SCRIPT_FILENAME'], $first_arg, $proc, (string) $rounds, '--life', (string) $from, (string) $kill];
        $child = proc_open($cmd, [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        $next = $rounds;
        while (($line = fgets($pipes[1])) !== false) {
            $o = json_decode($line, true);
            if (($o['event'] ?? '') !== 'kill_me') {
                fwrite(STDOUT, $line);
                fflush(STDOUT);
                continue;
            }
            usleep(random_int(20000, 300000));
            proc_terminate($child, 9);
            $expire($o);
            $next = $o['round'] + 1;
            $kill = -1;
            break;
        }
        fclose($pipes[1]);
        proc_close($child);
        $from = $next;
    }
}
