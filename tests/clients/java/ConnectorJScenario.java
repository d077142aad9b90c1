// MariaDB Connector/J (Debian's libmariadb-java) against the demo-like schema, in three
// connection modes: rewriteBatchedStatements=true (a batch of INSERTs becomes one multi-row
// INSERT; a batch of UPDATEs or a Statement batch becomes one multi-statement text),
// useServerPrepStmts=true (server-side prepares: COM_STMT_PREPARE / EXECUTE, or the
// driver's bulk command) and useServerPrepStmts=false (client-side prepares: each statement
// with its values in the text). Each mode runs the same batches and reads in its own key range.
// Prints the transcript as the suite's JSON: one {"step", "result"} a line.
//
// Connection: CLIENT_HOST, CLIENT_PORT, CLIENT_USER, CLIENT_PASSWORD, CLIENT_DB (environment).
// Run with the driver on the class path: java -cp /usr/share/java/mariadb-java-client.jar THIS

import java.math.BigDecimal;
import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class ConnectorJScenario {
    interface Step {
        Object run() throws Exception;
    }

    static final List<String> LINES = new ArrayList<>();

    /** Runs one step; its answer or the error it ended with is the step's result. */
    static void step(String name, Step fn) {
        Object result;
        try {
            result = fn.run();
        } catch (BatchUpdateException e) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("error", describe(e));
            m.put("updateCounts", ints(e.getUpdateCounts()));
            result = m;
        } catch (SQLException e) {
            result = Map.of("error", describe(e));
        } catch (Exception e) {
            result = Map.of("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("step", name);
        s.put("result", result);
        LINES.add(json(s));
    }

    /** `ERROR <code>: <message>`, without the driver's own prefix and query text. */
    static String describe(SQLException e) {
        String msg = e.getMessage();
        // Connector/J 2.x writes "(conn=N) message" and, for some errors, "\nQuery is: ...".
        msg = msg.replaceFirst("^\\(conn=\\d+\\) ", "");
        int q = msg.indexOf("\nQuery is");
        if (q >= 0) {
            msg = msg.substring(0, q);
        }
        return "ERROR " + e.getErrorCode() + ": " + msg;
    }

    static List<Object> ints(int[] counts) {
        List<Object> out = new ArrayList<>();
        for (int c : counts) {
            out.add(c);
        }
        return out;
    }

    static List<Object> rows(ResultSet rs) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        List<Object> out = new ArrayList<>();
        while (rs.next()) {
            Map<String, Object> row = new LinkedHashMap<>();
            for (int c = 1; c <= md.getColumnCount(); c++) {
                Object v = rs.getObject(c);
                row.put(md.getColumnLabel(c), v == null ? null : (v instanceof Number || v instanceof Boolean) ? v : v.toString());
            }
            out.add(row);
        }
        rs.close();
        return out;
    }

    static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof BigDecimal) {
            return quote(((BigDecimal) v).toPlainString());
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(quote(e.getKey().toString())).append(':').append(json(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (v instanceof List) {
            StringBuilder b = new StringBuilder("[");
            for (Object o : (List<?>) v) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(json(o));
            }
            return b.append(']').toString();
        }
        return quote(v.toString());
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    static String env(String k) {
        String v = System.getenv("CLIENT_" + k);
        if (v == null) {
            System.err.println("missing CLIENT_" + k);
            System.exit(2);
        }
        return v;
    }

    static Connection connect(String options) throws SQLException {
        String url = "jdbc:mariadb://" + env("HOST") + ":" + env("PORT") + "/" + env("DB")
            + "?user=" + env("USER") + "&password=" + env("PASSWORD") + "&" + options;
        return DriverManager.getConnection(url);
    }

    static Object exec(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            return s.executeUpdate(sql);
        }
    }

    static List<Object> query(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            return rows(s.executeQuery(sql));
        }
    }

    public static void main(String[] args) throws Exception {
        Connection setup = connect("");
        step("drop tables", () -> {
            for (String t : new String[] {"order_item", "orders", "country", "ledger"}) {
                exec(setup, "DROP TABLE IF EXISTS " + t);
            }
            return "dropped";
        });
        step("create tables", () -> {
            exec(setup, "CREATE TABLE country (code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL) ENGINE=InnoDB");
            exec(setup, "CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, "
                + "amount DECIMAL(10,2) NOT NULL, country_code CHAR(2) NULL, KEY ix_orders_user_id (user_id)) ENGINE=InnoDB");
            exec(setup, "CREATE TABLE order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, "
                + "sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY ix_order_item_user_id (user_id)) ENGINE=InnoDB");
            return "created";
        });
        step("seed countries", () -> exec(setup,
            "INSERT INTO country (code, name) VALUES ('de', 'Germany'), ('fr', 'France'), ('jp', 'Japan')"));

        String[][] modes = {
            {"rewriteBatchedStatements", "rewriteBatchedStatements=true"},
            {"useServerPrepStmts", "useServerPrepStmts=true"},
            {"clientPrepStmts", "useServerPrepStmts=false"},
        };
        for (int m = 0; m < modes.length; m++) {
            String mode = modes[m][0];
            int base = m * 100;
            Connection c = connect(modes[m][1]);

            step(mode + ": batch of INSERTs (addBatch/executeBatch)", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO orders (id, user_id, status, amount, country_code) VALUES (?, ?, ?, ?, ?)")) {
                    for (int i = 1; i <= 8; i++) {
                        ps.setInt(1, base + i);
                        ps.setInt(2, i);
                        ps.setString(3, new String[] {"new", "paid", "sent"}[i % 3]);
                        ps.setBigDecimal(4, new BigDecimal(i * 7 + "." + (10 + i)));
                        ps.setString(5, new String[] {"de", "fr", null}[i % 3]);
                        ps.addBatch();
                    }
                    ps.executeBatch();
                    // Per-row counts are the driver's to give (a rewritten batch gives
                    // SUCCESS_NO_INFO); the rows themselves are read back below.
                    return query(c, "SELECT COUNT(*) AS n FROM orders WHERE id > " + base + " AND id <= " + (base + 8));
                }
            });
            step(mode + ": batch of INSERTs of items", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO order_item (id, order_id, user_id, sku, qty) VALUES (?, ?, ?, ?, ?)")) {
                    for (int i = 1; i <= 8; i++) {
                        for (int k = 1; k <= 2; k++) {
                            ps.setInt(1, (base + i) * 10 + k);
                            ps.setInt(2, base + i);
                            ps.setInt(3, i);
                            ps.setString(4, "sku-" + k);
                            ps.setInt(5, k + i % 3);
                            ps.addBatch();
                        }
                    }
                    int[] counts = ps.executeBatch();
                    return counts.length;
                }
            });
            step(mode + ": batch of UPDATEs by shard key (one multi-statement text when rewritten)", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "UPDATE orders SET status = ?, amount = amount + ? WHERE user_id = ? AND id = ?")) {
                    for (int i = 1; i <= 8; i++) {
                        ps.setString(1, "upd-" + i);
                        ps.setBigDecimal(2, new BigDecimal("1.00"));
                        ps.setInt(3, i);
                        ps.setInt(4, base + i);
                        ps.addBatch();
                    }
                    return ints(ps.executeBatch());
                }
            });
            step(mode + ": batch of UPDATEs by primary key only (scattered)", () -> {
                try (PreparedStatement ps = c.prepareStatement("UPDATE order_item SET qty = qty * ? WHERE id = ?")) {
                    for (int i = 1; i <= 4; i++) {
                        ps.setInt(1, 10);
                        ps.setInt(2, (base + i) * 10 + 1);
                        ps.addBatch();
                    }
                    return ints(ps.executeBatch());
                }
            });
            step(mode + ": batch of UPDATEs matching no row and several rows", () -> {
                try (PreparedStatement ps = c.prepareStatement("UPDATE order_item SET sku = ? WHERE user_id = ? AND order_id = ?")) {
                    ps.setString(1, "none");
                    ps.setInt(2, 1);
                    ps.setInt(3, base + 99);
                    ps.addBatch();
                    ps.setString(1, "both");
                    ps.setInt(2, 2);
                    ps.setInt(3, base + 2);
                    ps.addBatch();
                    return ints(ps.executeBatch());
                }
            });
            step(mode + ": Statement batch of writes", () -> {
                try (Statement s = c.createStatement()) {
                    s.addBatch("UPDATE orders SET country_code = 'jp' WHERE user_id = 3 AND id = " + (base + 3));
                    s.addBatch("DELETE FROM order_item WHERE user_id = 4 AND id = " + ((base + 4) * 10 + 2));
                    s.addBatch("INSERT INTO orders (id, user_id, status, amount) VALUES (" + (base + 9) + ", 9, 'new', 9.90)");
                    return ints(s.executeBatch());
                }
            });
            step(mode + ": batch of INSERTs with a duplicate key in the middle", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO orders (id, user_id, status, amount) VALUES (?, ?, ?, ?)")) {
                    // User 1 for all three: order base+1 is user 1's, so its id is taken in
                    // that shard (the key is unique per shard, not over the sharded table).
                    for (int id : new int[] {base + 20, base + 1, base + 21}) {
                        ps.setInt(1, id);
                        ps.setInt(2, 1);
                        ps.setString(3, "dup?");
                        ps.setBigDecimal(4, BigDecimal.ONE);
                        ps.addBatch();
                    }
                    ps.executeBatch();
                    return "no error";
                }
            });
            step(mode + ": orders after the batches", () -> query(c,
                "SELECT id, user_id, status, amount, country_code FROM orders WHERE id > " + base + " AND id < " + (base + 100) + " ORDER BY id"));
            step(mode + ": items after the batches", () -> query(c,
                "SELECT id, order_id, user_id, sku, qty FROM order_item WHERE order_id > " + base + " AND order_id < " + (base + 100) + " ORDER BY id"));

            step(mode + ": prepared SELECT by shard key, re-executed", () -> {
                List<Object> out = new ArrayList<>();
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT id, status, amount, country_code FROM orders WHERE user_id = ? AND id > ? ORDER BY id")) {
                    for (int u : new int[] {1, 5, 9}) {
                        ps.setInt(1, u);
                        ps.setInt(2, base);
                        out.add(rows(ps.executeQuery()));
                    }
                }
                return out;
            });
            step(mode + ": prepared join with the ER child and the global table", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT o.id, c.name, i.sku, i.qty FROM orders o JOIN order_item i ON i.order_id = o.id AND i.user_id = o.user_id "
                            + "LEFT JOIN country c ON c.code = o.country_code WHERE o.user_id IN (?, ?) AND o.id > ? ORDER BY i.id")) {
                    ps.setInt(1, 2);
                    ps.setInt(2, 3);
                    ps.setInt(3, base);
                    return rows(ps.executeQuery());
                }
            });
            step(mode + ": prepared aggregate with LIMIT ?", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT status, COUNT(*) AS n, SUM(amount) AS total FROM orders WHERE id > ? GROUP BY status ORDER BY total DESC, status LIMIT ?")) {
                    ps.setInt(1, base);
                    ps.setInt(2, 3);
                    return rows(ps.executeQuery());
                }
            });
            step(mode + ": result set metadata", () -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT id, status, amount, country_code FROM orders WHERE user_id = ?")) {
                    ps.setInt(1, 1);
                    ResultSet rs = ps.executeQuery();
                    ResultSetMetaData md = rs.getMetaData();
                    List<Object> out = new ArrayList<>();
                    for (int i = 1; i <= md.getColumnCount(); i++) {
                        out.add(Arrays.asList(md.getColumnLabel(i), md.getTableName(i), md.getColumnTypeName(i),
                            md.getPrecision(i), md.getScale(i), md.isNullable(i)));
                    }
                    rs.close();
                    return out;
                }
            });
            step(mode + ": transaction with a batch rolled back", () -> {
                c.setAutoCommit(false);
                try (PreparedStatement ps = c.prepareStatement("UPDATE orders SET status = ? WHERE user_id = ? AND id = ?")) {
                    for (int i = 5; i <= 8; i++) {
                        ps.setString(1, "gone");
                        ps.setInt(2, i);
                        ps.setInt(3, base + i);
                        ps.addBatch();
                    }
                    ps.executeBatch();
                    List<Object> inside = query(c, "SELECT COUNT(*) AS n FROM orders WHERE status = 'gone'");
                    c.rollback();
                    c.setAutoCommit(true);
                    return List.of(inside, query(c, "SELECT COUNT(*) AS n FROM orders WHERE status = 'gone'"));
                }
            });
            c.close();
        }
        step("drop tables at the end", () -> {
            for (String t : new String[] {"order_item", "orders", "country"}) {
                exec(setup, "DROP TABLE IF EXISTS " + t);
            }
            return "dropped";
        });
        setup.close();
        System.out.print("[\n" + String.join(",\n", LINES) + "\n]\n");
    }
}
