<?php
// PHP PDO (pdo_mysql over mysqlnd) against the demo-like schema: prepared selects, inserts,
// updates and deletes with emulated prepares (PDO interpolates the values into the text) and
// with native ones (COM_STMT_PREPARE / COM_STMT_EXECUTE, binary rows), a transaction rolled
// back, and multi-statement query() texts read rowset by rowset with nextRowset().
// Prints the transcript as the suite's JSON: one {"step", "result"} a line.
//
// Connection: CLIENT_HOST, CLIENT_PORT, CLIENT_USER, CLIENT_PASSWORD, CLIENT_DB (environment).

$env = [];
foreach (['host', 'port', 'user', 'password', 'db'] as $k) {
    $v = getenv('CLIENT_' . strtoupper($k));
    if ($v === false) {
        fwrite(STDERR, "missing CLIENT_" . strtoupper($k) . "\n");
        exit(2);
    }
    $env[$k] = $v;
}

$steps = [];

/** Runs one step; its answer or the error it ended with is the step's result. */
function step(string $name, callable $fn): void
{
    global $steps;
    try {
        $result = $fn();
    } catch (PDOException $e) {
        $info = $e->errorInfo;
        $result = ['error' => is_array($info) && isset($info[1])
            ? "ERROR {$info[1]}: {$info[2]}"
            : get_class($e) . ': ' . $e->getMessage()];
    }
    $steps[] = ['step' => $name, 'result' => $result];
}

function connect(bool $emulate): PDO
{
    global $env;
    $dsn = "mysql:host={$env['host']};port={$env['port']};dbname={$env['db']};charset=utf8mb4";
    return new PDO($dsn, $env['user'], $env['password'], [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_EMULATE_PREPARES => $emulate,
        PDO::ATTR_DEFAULT_FETCH_MODE => PDO::FETCH_ASSOC,
    ]);
}

/** Rows of a statement as lists of [column => value] (PHP types kept: int, string, null). */
function rows(PDOStatement $s): array
{
    return $s->fetchAll(PDO::FETCH_ASSOC);
}

/** Every rowset of a multi-statement text: a result's rows, or a write's affected count. */
function rowsets(PDOStatement $s): array
{
    $out = [];
    do {
        if ($s->columnCount() > 0) {
            $out[] = ['rows' => $s->fetchAll(PDO::FETCH_ASSOC)];
        } else {
            $out[] = ['affected' => $s->rowCount()];
        }
    } while ($s->nextRowset());
    return $out;
}

$setup = connect(true);
step('drop tables', function () use ($setup) {
    foreach (['order_item', 'orders', 'country', 'ledger', 'events'] as $t) {
        $setup->exec("DROP TABLE IF EXISTS $t");
    }
    return 'dropped';
});
step('create tables', function () use ($setup) {
    $setup->exec('CREATE TABLE country (code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL) ENGINE=InnoDB');
    $setup->exec('CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, '
        . 'amount DECIMAL(10,2) NOT NULL, country_code CHAR(2) NULL, KEY ix_orders_user_id (user_id)) ENGINE=InnoDB');
    $setup->exec('CREATE TABLE order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, '
        . 'sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY ix_order_item_user_id (user_id)) ENGINE=InnoDB');
    $setup->exec('CREATE TABLE ledger (id INT NOT NULL PRIMARY KEY, day DATE NOT NULL, account VARCHAR(20) NOT NULL, '
        . 'amount DECIMAL(12,2) NOT NULL) ENGINE=InnoDB');
    // Keys from AUTO_INCREMENT on one server; on Shoal from the table's global sequence.
    $setup->exec('CREATE TABLE events (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20) NOT NULL) ENGINE=InnoDB');
    return 'created';
});
step('seed countries (exec)', fn () => $setup->exec(
    "INSERT INTO country (code, name) VALUES ('de', 'Germany'), ('fr', 'France'), ('jp', 'Japan')"
));

// Both kinds of prepares run the same steps; each mode has its own key range.
foreach (['emulated' => true, 'native' => false] as $mode => $emulate) {
    $pdo = connect($emulate);
    $base = $emulate ? 0 : 100;
    step("$mode: ATTR_EMULATE_PREPARES", fn () => (bool) $pdo->getAttribute(PDO::ATTR_EMULATE_PREPARES));

    step("$mode: prepared INSERT executed per row", function () use ($pdo, $base) {
        $ins = $pdo->prepare('INSERT INTO orders (id, user_id, status, amount, country_code) VALUES (?, ?, ?, ?, ?)');
        $affected = [];
        for ($i = 1; $i <= 8; $i++) {
            $ins->execute([$base + $i, $i, ['new', 'paid', 'sent'][$i % 3], sprintf('%d.%02d', $i * 7, $i), ['de', 'fr', null][$i % 3]]);
            $affected[] = $ins->rowCount();
        }
        return $affected;
    });
    step("$mode: prepared INSERT of items with named parameters", function () use ($pdo, $base) {
        $ins = $pdo->prepare('INSERT INTO order_item (id, order_id, user_id, sku, qty) VALUES (:id, :order_id, :user_id, :sku, :qty)');
        $n = 0;
        for ($i = 1; $i <= 8; $i++) {
            foreach ([1, 2] as $k) {
                $ins->bindValue(':id', ($base + $i) * 10 + $k, PDO::PARAM_INT);
                $ins->bindValue(':order_id', $base + $i, PDO::PARAM_INT);
                $ins->bindValue(':user_id', $i, PDO::PARAM_INT);
                $ins->bindValue(':sku', "sku-$k");
                $ins->bindValue(':qty', $k + $i % 3, PDO::PARAM_INT);
                $ins->execute();
                $n += $ins->rowCount();
            }
        }
        return $n;
    });
    step("$mode: prepared INSERT of several rows at once", function () use ($pdo, $base) {
        $ins = $pdo->prepare('INSERT INTO orders (id, user_id, status, amount) VALUES (?, ?, ?, ?), (?, ?, ?, ?), (?, ?, ?, ?)');
        $ins->execute([$base + 9, 9, 'new', '1.50', $base + 10, 10, 'new', '2.50', $base + 11, 11, 'paid', '3.50']);
        return $ins->rowCount();
    });

    $byUser = $pdo->prepare('SELECT id, user_id, status, amount, country_code FROM orders WHERE user_id = ? AND id > ? ORDER BY id');
    foreach ([1, 4, 10] as $user) {
        step("$mode: prepared SELECT by shard key, user $user (re-executed)", function () use ($byUser, $user, $base) {
            $byUser->execute([$user, $base]);
            return rows($byUser);
        });
    }
    step("$mode: prepared SELECT with IN over shards", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT id, status FROM orders WHERE user_id IN (?, ?, ?) AND id > ? ORDER BY id');
        $s->execute([2, 3, 6, $base]);
        return rows($s);
    });
    step("$mode: prepared SELECT by primary key (every shard)", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT id, user_id, amount FROM orders WHERE id = :id');
        $s->execute([':id' => $base + 5]);
        return rows($s);
    });
    step("$mode: prepared SELECT with LIMIT ? (bound as int)", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT id FROM orders WHERE id > ? ORDER BY amount DESC, id LIMIT ?');
        $s->bindValue(1, $base, PDO::PARAM_INT);
        $s->bindValue(2, 3, PDO::PARAM_INT);
        $s->execute();
        return rows($s);
    });
    step("$mode: prepared join with the ER child", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT o.id, i.sku, i.qty FROM orders o JOIN order_item i ON i.order_id = o.id AND i.user_id = o.user_id '
            . 'WHERE o.user_id = ? AND o.id > ? ORDER BY i.id');
        $s->execute([3, $base]);
        return rows($s);
    });
    step("$mode: prepared join with the global table", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT o.id, c.name FROM orders o JOIN country c ON c.code = o.country_code WHERE o.id BETWEEN ? AND ? ORDER BY o.id');
        $s->execute([$base + 1, $base + 8]);
        return rows($s);
    });
    step("$mode: prepared aggregate per user", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM orders WHERE id > ? AND id <= ? GROUP BY user_id ORDER BY user_id');
        $s->execute([$base, $base + 11]);
        return rows($s);
    });
    step("$mode: column metadata of a prepared SELECT", function () use ($pdo, $base) {
        $s = $pdo->prepare('SELECT id, status, amount, country_code FROM orders WHERE user_id = ? AND id > ?');
        $s->execute([2, $base]);
        rows($s);
        $meta = [];
        for ($c = 0; $c < $s->columnCount(); $c++) {
            $m = $s->getColumnMeta($c);
            $meta[] = [$m['name'], $m['native_type'] ?? null, $m['len'], $m['precision'], $m['pdo_type']];
        }
        return $meta;
    });
    step("$mode: prepared UPDATE by shard key", function () use ($pdo, $base) {
        $s = $pdo->prepare('UPDATE orders SET status = ?, amount = amount + ? WHERE user_id = ? AND id > ?');
        $s->execute(['done', '1.25', 2, $base]);
        return $s->rowCount();
    });
    step("$mode: prepared UPDATE by primary key (scattered)", function () use ($pdo, $base) {
        $s = $pdo->prepare('UPDATE orders SET status = :status WHERE id = :id');
        $s->execute([':status' => 'void', ':id' => $base + 7]);
        return $s->rowCount();
    });
    step("$mode: prepared DELETE", function () use ($pdo, $base) {
        $s = $pdo->prepare('DELETE FROM order_item WHERE user_id = ? AND order_id = ? AND id = ?');
        $s->execute([8, $base + 8, ($base + 8) * 10 + 2]);
        return $s->rowCount();
    });
    step("$mode: prepared INSERT of a duplicate key", function () use ($pdo, $base) {
        $s = $pdo->prepare('INSERT INTO orders (id, user_id, status, amount) VALUES (?, ?, ?, ?)');
        $s->execute([$base + 1, 1, 'dup', '0.00']);
        return $s->rowCount();
    });
    step("$mode: prepared SELECT of an unknown column", function () use ($pdo) {
        $s = $pdo->prepare('SELECT nope FROM orders WHERE user_id = ?');
        $s->execute([1]);
        return rows($s);
    });
    step("$mode: transaction rolled back", function () use ($pdo, $base) {
        $pdo->beginTransaction();
        $pdo->prepare('INSERT INTO orders (id, user_id, status, amount) VALUES (?, ?, ?, ?)')
            ->execute([$base + 50, 5, 'new', '9.99']);
        $pdo->prepare('UPDATE orders SET status = ? WHERE user_id = ? AND id > ?')->execute(['gone', 6, $base]);
        $inside = $pdo->query("SELECT COUNT(*) FROM orders WHERE id > $base")->fetchColumn();
        $pdo->rollBack();
        $after = $pdo->query("SELECT COUNT(*) FROM orders WHERE id > $base")->fetchColumn();
        $status = $pdo->query("SELECT status FROM orders WHERE user_id = 6 AND id > $base")->fetchColumn();
        return [$inside, $after, $status];
    });
    step("$mode: transaction committed", function () use ($pdo, $base) {
        $pdo->beginTransaction();
        $pdo->prepare('INSERT INTO orders (id, user_id, status, amount) VALUES (?, ?, ?, ?)')
            ->execute([$base + 51, 5, 'new', '9.99']);
        $pdo->commit();
        $s = $pdo->prepare('SELECT id, status FROM orders WHERE user_id = ? AND id > ? ORDER BY id');
        $s->execute([5, $base]);
        return rows($s);
    });
    step("$mode: orders after the prepared steps", function () use ($pdo, $base) {
        return rows($pdo->query("SELECT id, user_id, status, amount, country_code FROM orders WHERE id > $base ORDER BY id"));
    });
    step("$mode: prepared INSERTs leaving out the generated key", function () use ($pdo) {
        $out = [];
        $one = $pdo->prepare('INSERT INTO events (note) VALUES (?)');
        foreach (['a', 'b'] as $note) {
            $one->execute([$note]);
            $out[] = [$one->rowCount(), $pdo->lastInsertId()];
        }
        $three = $pdo->prepare('INSERT INTO events (note) VALUES (?), (?), (?)');
        $three->execute(['c', 'd', 'e']);
        $out[] = [$three->rowCount(), $pdo->lastInsertId()];
        $out[] = rows($pdo->query('SELECT LAST_INSERT_ID() AS id'));
        $out[] = rows($pdo->query('SELECT id, note FROM events ORDER BY id'));
        return $out;
    });
}

// query() with several statements in one text: mysqlnd sends them in one COM_QUERY
// (PDO::MYSQL_ATTR_MULTI_STATEMENTS is on by default) and reads every result in turn.
$pdo = connect(true);
step('multi-statement query(): SELECTs over shards and the global table', fn () => rowsets($pdo->query(
    'SELECT id, status FROM orders WHERE user_id = 1 ORDER BY id; '
    . 'SELECT code, name FROM country ORDER BY code; '
    . 'SELECT COUNT(*) AS n, SUM(amount) AS total FROM orders'
)));
step('multi-statement query(): writes between reads', fn () => rowsets($pdo->query(
    "UPDATE orders SET status = 'multi' WHERE user_id = 3; "
    . "INSERT INTO orders (id, user_id, status, amount) VALUES (201, 1, 'multi', 1.00), (202, 2, 'multi', 2.00); "
    . "SELECT id, user_id, status FROM orders WHERE status = 'multi' ORDER BY id; "
    . "DELETE FROM orders WHERE id IN (201, 202); "
    . "SELECT COUNT(*) AS n FROM orders WHERE status = 'multi'"
)));
// A system variable set by the text's first statement holds for the next ones. (User
// variables read outside SET are refused through Shoal by design: docs/sql-support.md.)
step('multi-statement query(): SET of a session variable, then reads', fn () => rowsets($pdo->query(
    "SET SESSION time_zone = '+02:00'; SELECT id FROM orders WHERE user_id = 4 ORDER BY id; "
    . "SELECT @@session.time_zone AS tz; SET SESSION time_zone = DEFAULT"
)));
step('multi-statement query(): a transaction in one text', fn () => rowsets($pdo->query(
    "START TRANSACTION; UPDATE orders SET amount = amount + 10 WHERE user_id = 4; "
    . "UPDATE orders SET amount = amount + 10 WHERE user_id = 5; COMMIT; "
    . "SELECT user_id, SUM(amount) AS total FROM orders WHERE user_id IN (4, 5) GROUP BY user_id ORDER BY user_id"
)));
step('multi-statement query(): an error in the second statement', function () use ($pdo) {
    $s = $pdo->query('SELECT 1 AS a; SELECT nope FROM orders; SELECT 3 AS c');
    $out = [['rows' => $s->fetchAll(PDO::FETCH_ASSOC)]];
    try {
        while ($s->nextRowset()) {
            $out[] = ['rows' => $s->fetchAll(PDO::FETCH_ASSOC)];
        }
    } catch (PDOException $e) {
        $out[] = ['error' => "ERROR {$e->errorInfo[1]}: {$e->errorInfo[2]}"];
    }
    return $out;
});
step('the connection answers after the failed multi-statement text', fn () =>
    rows($pdo->query('SELECT COUNT(*) AS n FROM orders')));
step('exec() of a multi-statement text of writes', function () use ($pdo) {
    // exec() returns the first statement's count; the rest are read (and discarded) by PDO.
    $n = $pdo->exec("UPDATE orders SET status = 'x1' WHERE user_id = 1; UPDATE orders SET status = 'x2' WHERE user_id = 2");
    return [$n, rows($pdo->query("SELECT id, status FROM orders WHERE user_id IN (1, 2) ORDER BY id"))];
});

step('drop tables at the end', function () use ($setup) {
    foreach (['order_item', 'orders', 'country', 'ledger', 'events'] as $t) {
        $setup->exec("DROP TABLE IF EXISTS $t");
    }
    return 'dropped';
});

$lines = array_map(fn ($s) => json_encode($s, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), $steps);
echo "[\n" . implode(",\n", $lines) . "\n]\n";
