// Hibernate 3.6 (Debian's libhibernate3-java, annotations, over MariaDB Connector/J) against
// the demo-like schema: the tables created and filled with plain JDBC, then the HQL shapes
// issue 49 names: `join fetch` of an order's items (Hibernate joins `order_item` on its
// foreign key `order_id` alone, not on the shard key), with a filter, pinned to one user, with
// setMaxResults (applied in memory by Hibernate), an inner join with a condition on the child,
// an `in (subquery)`, and a grouped count through the join. Prints the transcript as the
// suite's JSON: one {"step", "result"} a line.
//
// Connection: CLIENT_HOST, CLIENT_PORT, CLIENT_USER, CLIENT_PASSWORD, CLIENT_DB (environment).
// Run with the JARs of HIBERNATE_CLASSPATH (tests/tests/clients.rs) on the class path.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import javax.persistence.Column;
import javax.persistence.Entity;
import javax.persistence.FetchType;
import javax.persistence.Id;
import javax.persistence.JoinColumn;
import javax.persistence.ManyToOne;
import javax.persistence.OneToMany;
import javax.persistence.OrderBy;
import javax.persistence.Table;

import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.annotations.Proxy;
import org.hibernate.cfg.Configuration;

public class HibernateScenario {
    // No proxies: the entities live in the source launcher's in-memory class loader, where
    // Hibernate cannot define proxy classes.
    @Entity(name = "Ord")
    @Table(name = "orders")
    @Proxy(lazy = false)
    public static class Ord {
        @Id
        public Integer id;
        @Column(name = "user_id")
        public Integer userId;
        public String status;
        public BigDecimal amount;
        @Column(name = "country_code")
        public String countryCode;
        @OneToMany(mappedBy = "order", fetch = FetchType.LAZY)
        @OrderBy("id")
        public List<Item> items = new ArrayList<>();

        public Ord() {}
    }

    @Entity(name = "Item")
    @Table(name = "order_item")
    @Proxy(lazy = false)
    public static class Item {
        @Id
        public Integer id;
        @ManyToOne(fetch = FetchType.LAZY)
        @JoinColumn(name = "order_id")
        public Ord order;
        @Column(name = "user_id")
        public Integer userId;
        public String sku;
        public Integer qty;

        public Item() {}
    }

    interface Step {
        Object run() throws Exception;
    }

    static final List<String> LINES = new ArrayList<>();

    static void step(String name, Step fn) {
        Object result;
        try {
            result = fn.run();
        } catch (Exception e) {
            Throwable t = e;
            while (t.getCause() != null && !(t instanceof SQLException)) {
                t = t.getCause();
            }
            if (t instanceof SQLException) {
                String msg = t.getMessage().replaceFirst("^\\(conn=\\d+\\) ", "");
                int q = msg.indexOf("\nQuery is");
                result = Map.of("error", "ERROR " + ((SQLException) t).getErrorCode() + ": " + (q >= 0 ? msg.substring(0, q) : msg));
            } else {
                result = Map.of("error", t.getClass().getSimpleName() + ": " + t.getMessage());
            }
        }
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("step", name);
        s.put("result", result);
        LINES.add(json(s));
    }

    static Map<String, Object> item(Item i) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", i.id);
        m.put("order_id", i.order == null ? null : i.order.id);
        m.put("user_id", i.userId);
        m.put("sku", i.sku);
        m.put("qty", i.qty);
        return m;
    }

    static List<Object> orders(List<?> list) {
        List<Object> out = new ArrayList<>();
        for (Object o : list) {
            Ord r = (Ord) o;
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", r.id);
            m.put("user_id", r.userId);
            m.put("status", r.status);
            m.put("amount", r.amount);
            m.put("country_code", r.countryCode);
            List<Object> items = new ArrayList<>();
            for (Item i : r.items) {
                items.add(item(i));
            }
            m.put("items", items);
            out.add(m);
        }
        return out;
    }

    static List<Object> tuples(List<?> list) {
        List<Object> out = new ArrayList<>();
        for (Object o : list) {
            if (o instanceof Object[]) {
                List<Object> row = new ArrayList<>();
                for (Object v : (Object[]) o) {
                    row.add(v);
                }
                out.add(row);
            } else {
                out.add(o);
            }
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        // Hibernate finds entity classes by name through the context class loader: the
        // source launcher's in-memory one holds them.
        Thread.currentThread().setContextClassLoader(HibernateScenario.class.getClassLoader());
        String host = System.getenv("CLIENT_HOST");
        String port = System.getenv("CLIENT_PORT");
        String user = System.getenv("CLIENT_USER");
        String password = System.getenv("CLIENT_PASSWORD");
        String db = System.getenv("CLIENT_DB");
        String url = "jdbc:mariadb://" + host + ":" + port + "/" + db;
        // Hibernate logs through slf4j (no binding: nothing printed) and JUL.
        java.util.logging.Logger.getLogger("org.hibernate").setLevel(java.util.logging.Level.SEVERE);

        step("create and fill tables (JDBC)", () -> {
            try (Connection c = DriverManager.getConnection(url, user, password); Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS order_item");
                s.execute("DROP TABLE IF EXISTS orders");
                s.execute("CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, amount DECIMAL(10,2) NOT NULL, country_code CHAR(2), KEY (user_id))");
                s.execute("CREATE TABLE order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY (user_id))");
                String[] status = {"new", "paid", "sent"};
                String[] country = {"de", "fr", "jp"};
                for (int i = 1; i <= 16; i++) {
                    int u = (i % 8) + 1;
                    s.execute(String.format("INSERT INTO orders VALUES (%d, %d, '%s', %d.%d0, '%s')", i, u, status[i % 3], (i * 37) % 100, i % 10, country[i % 3]));
                    for (int k = 1; k <= 2; k++) {
                        s.execute(String.format("INSERT INTO order_item VALUES (%d, %d, %d, 'sku-%d', %d)", i * 10 + k, i, u, (i * 7 + k) % 5, k + (i % 4)));
                    }
                }
            }
            return "ok";
        });

        Configuration cfg = new Configuration()
            .setProperty("hibernate.connection.driver_class", "org.mariadb.jdbc.Driver")
            .setProperty("hibernate.connection.url", url)
            .setProperty("hibernate.connection.username", user)
            .setProperty("hibernate.connection.password", password)
            .setProperty("hibernate.connection.pool_size", "2")
            .setProperty("hibernate.dialect", "org.hibernate.dialect.MySQL5InnoDBDialect")
            .setProperty("hibernate.bytecode.use_reflection_optimizer", "false")
            .setProperty("hibernate.temp.use_jdbc_metadata_defaults", "false")
            .addAnnotatedClass(Ord.class)
            .addAnnotatedClass(Item.class);
        SessionFactory sf = cfg.buildSessionFactory();

        step("join fetch", () -> {
            Session s = sf.openSession();
            try {
                return orders(s.createQuery("select distinct o from Ord o left join fetch o.items where o.status = :s order by o.id")
                    .setParameter("s", "paid").list());
            } finally {
                s.close();
            }
        });
        step("join fetch, one user", () -> {
            Session s = sf.openSession();
            try {
                return orders(s.createQuery("select distinct o from Ord o left join fetch o.items where o.userId = :u order by o.id")
                    .setParameter("u", 3).list());
            } finally {
                s.close();
            }
        });
        step("join fetch with setMaxResults", () -> {
            Session s = sf.openSession();
            try {
                return orders(s.createQuery("select distinct o from Ord o left join fetch o.items order by o.id")
                    .setFirstResult(2).setMaxResults(3).list());
            } finally {
                s.close();
            }
        });
        step("inner join with a condition on the child", () -> {
            Session s = sf.openSession();
            try {
                return tuples(s.createQuery("select o.id, i.id from Ord o join o.items i where i.sku = :k order by o.id, i.id")
                    .setParameter("k", "sku-2").list());
            } finally {
                s.close();
            }
        });
        step("in (subquery)", () -> {
            Session s = sf.openSession();
            try {
                return tuples(s.createQuery("select o.id from Ord o where o.id in (select i.order.id from Item i where i.qty > 4) order by o.id").list());
            } finally {
                s.close();
            }
        });
        step("grouped count through the join", () -> {
            Session s = sf.openSession();
            try {
                return tuples(s.createQuery("select o.status, count(i.id) from Ord o join o.items i group by o.status order by o.status").list());
            } finally {
                s.close();
            }
        });
        sf.close();
        System.out.println("[\n" + String.join(",\n", LINES) + "\n]");
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
}
