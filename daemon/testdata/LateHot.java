// A Java program for TestUnwindDWARFLateCode (Rounds.java calls its late too): it runs one
// loop until the JVM is 12 s old, then another, new one, until it is 19 s old. profd asks a
// new JVM for its perf map each time its age has doubled since the last ask (--java-perfmap
// 60s: at some 2, 5 and 10 s, each ask a tick late), so HotSpot compiles the second loop
// after the third ask, and the fourth would come at some 20 s, after the program's exit.
// The first loop is workloads/runtimes/Hot.java's mixInts, compiled with it.
public class LateHot {
    static long late(int n) {
        long s = 1;
        for (int i = 0; i < n; i++) {
            s = s * 31 + (i % 13);
            s ^= s >>> 17;
        }
        return s;
    }

    public static void main(String[] args) {
        java.lang.management.RuntimeMXBean rt = java.lang.management.ManagementFactory.getRuntimeMXBean();
        long acc = 0;
        while (rt.getUptime() < 12000) acc ^= Hot.mixInts(300000);
        while (rt.getUptime() < 19000) acc ^= late(300000);
        System.out.println("done " + acc);
    }
}
