// Iceberg's REST catalog server for the tests, bound to 127.0.0.1 on a free port.
//
// It is the server of Iceberg's own REST test fixture (org.apache.iceberg.rest.RESTCatalogServer, the
// apache/iceberg-rest-fixture image): a JdbcCatalog behind RESTServerCatalogAdapter and RESTCatalogServlet,
// configured by CATALOG_* variables (CATALOG_INCLUDE__CREDENTIALS=true vends the catalog's S3 credentials per
// table). That server listens on every interface; this launcher builds the same pieces (package-private, hence
// reflection) and binds Jetty to the loopback interface, so a test never listens beyond 127.0.0.1.
// Run with the jars of testbed/maven/rest-catalog.pom.xml: java -cp 'jars/*' RestCatalog.java [port]
import jakarta.servlet.Servlet;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class RestCatalog {
  public static void main(String[] args) throws Exception {
    Class<?> serverClass = Class.forName("org.apache.iceberg.rest.RESTCatalogServer");
    Constructor<?> newServer = serverClass.getDeclaredConstructor();
    newServer.setAccessible(true);
    Method initialize = serverClass.getDeclaredMethod("initializeBackendCatalog");
    initialize.setAccessible(true);
    Object context = initialize.invoke(newServer.newInstance());

    Class<?> contextClass = Class.forName("org.apache.iceberg.rest.RESTCatalogServer$CatalogContext");
    Constructor<?> newAdapter =
        Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter").getDeclaredConstructor(contextClass);
    newAdapter.setAccessible(true);
    Object adapter = newAdapter.newInstance(context);
    Constructor<?> newServlet =
        Class.forName("org.apache.iceberg.rest.RESTCatalogServlet")
            .getDeclaredConstructor(Class.forName("org.apache.iceberg.rest.RESTCatalogAdapter"));
    newServlet.setAccessible(true);
    Servlet servlet = (Servlet) newServlet.newInstance(adapter);

    ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    handler.addServlet(new ServletHolder(servlet), "/*");
    Server http = new Server();
    ServerConnector connector = new ServerConnector(http);
    connector.setHost("127.0.0.1");
    connector.setPort(args.length > 0 ? Integer.parseInt(args[0]) : 0);
    http.addConnector(connector);
    http.setHandler(handler);
    http.start();
    // The test fixture waits for this line and reads the port from it.
    System.out.println("lakesort-rest-catalog listening on 127.0.0.1:" + connector.getLocalPort());
    System.out.flush();
    http.join();
  }
}
